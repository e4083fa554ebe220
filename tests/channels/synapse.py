"""A real Synapse homeserver for the Matrix channel's tests (issue 30): `matrix-synapse`
from PyPI, started once per test worker on loopback with SQLite, from a generated config
(no federation, registration only through the shared-secret admin API, rate limits
relaxed), and the test users it registers. `MatrixUser` is the outside sender's client:
plain httpx against the client-server API, its /sync long-polled to wait for events.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

from tests.conftest import PATIENCE
from tests.known_secrets import MATRIX_PASSWORD

SERVER_NAME = "localhost"
USERS = ("zcbot", "alice", "mallory", "ops")  # the bot, an admitted sender, a stranger, an approver
_RELAXED = {"per_second": 10000, "burst_count": 10000}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def homeserver_config(root: Path, port: int, shared_secret: str) -> dict[str, Any]:
    return {
        "server_name": SERVER_NAME,
        "pid_file": str(root / "homeserver.pid"),
        "public_baseurl": f"http://127.0.0.1:{port}/",
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(root / "homeserver.db")}},
        "media_store_path": str(root / "media"),
        "signing_key_path": str(root / "signing.key"),
        "registration_shared_secret": shared_secret,
        "macaroon_secret_key": secrets.token_hex(16),
        "form_secret": secrets.token_hex(16),
        "enable_registration": False,
        "report_stats": False,
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],  # no federation
        "presence": {"enabled": False},
        # Synapse answers a repeated /sync (same user, device, filter and token) from a
        # two-minute cache: a test's fresh bot would be handed an earlier test's answers.
        "caches": {"sync_response_cache_duration": 0},
        "url_preview_enabled": False,
        "rc_message": _RELAXED,
        "rc_registration": _RELAXED,
        "rc_login": {"address": _RELAXED, "account": _RELAXED, "failed_attempts": _RELAXED},
        "rc_joins": {"local": _RELAXED, "remote": _RELAXED},
        "rc_joins_per_room": _RELAXED,
        "rc_invites": {"per_room": _RELAXED, "per_user": _RELAXED, "per_issuer": _RELAXED},
        "rc_3pid_validation": _RELAXED,
        "rc_admin_redaction": _RELAXED,
        "rc_room_creation": _RELAXED,
    }


def _signing_key(path: Path) -> None:
    from signedjson.key import generate_signing_key, write_signing_keys

    with path.open("w") as out:
        write_signing_keys(out, [generate_signing_key("a_test")])


@dataclass
class Homeserver:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)  # localpart -> access token

    def user_id(self, localpart: str) -> str:
        return f"@{localpart}:{SERVER_NAME}"

    def user(self, localpart: str) -> MatrixUser:
        return MatrixUser(self.url, self.user_id(localpart), self.tokens[localpart])


def register(url: str, shared_secret: str, localpart: str, password: str) -> str:
    """A user made through the shared-secret admin API (the config allows no other way):
    its access token."""
    with httpx.Client(base_url=url, timeout=PATIENCE) as http:
        nonce = http.get("/_synapse/admin/v1/register").json()["nonce"]
        mac = hmac.new(shared_secret.encode(), digestmod=hashlib.sha1)
        mac.update(f"{nonce}\x00{localpart}\x00{password}\x00notadmin".encode())
        answer = http.post(
            "/_synapse/admin/v1/register",
            json={
                "nonce": nonce,
                "username": localpart,
                "password": password,
                "admin": False,
                "mac": mac.hexdigest(),
            },
        )
        answer.raise_for_status()
        return str(answer.json()["access_token"])


def start_homeserver(root: Path) -> Homeserver:
    """Synapse on a free loopback port; returns once its client API answers. Its output
    is read until it says it listens (an event, not a guess at how long start-up takes)."""
    root.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    shared_secret = secrets.token_hex(16)
    _signing_key(root / "signing.key")
    config = root / "homeserver.yaml"
    config.write_text(json.dumps(homeserver_config(root, port, shared_secret)))  # JSON is YAML
    log = root / "synapse.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "synapse.app.homeserver", "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=root,
        start_new_session=True,
    )
    assert process.stdout is not None
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_listening(process, log)
        with httpx.Client(base_url=url, timeout=PATIENCE) as http:
            http.get("/_matrix/client/versions").raise_for_status()
        server = Homeserver(url, process, log)
        for localpart in USERS:
            server.tokens[localpart] = register(url, shared_secret, localpart, MATRIX_PASSWORD)
    except BaseException:
        stop_homeserver(process)
        raise
    return server


def _wait_listening(process: subprocess.Popen[bytes], log: Path) -> None:
    """Until Synapse logs that it listens; its output goes on to `log` from a thread that
    drains the pipe (a full pipe would stall it)."""
    import threading

    assert process.stdout is not None
    stream = process.stdout
    listening = threading.Event()

    def drain() -> None:
        with log.open("ab") as out:
            for line in stream:
                out.write(line)
                out.flush()
                if b"now listening on TCP port" in line or b"Synapse now listening" in line:
                    listening.set()
        listening.set()  # exited: the caller finds out below

    threading.Thread(target=drain, daemon=True, name="synapse-log").start()
    if not listening.wait(PATIENCE) or process.poll() is not None:
        raise RuntimeError(f"synapse did not start: {log.read_text(errors='replace')[-3000:]}")


def stop_homeserver(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(PATIENCE)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def synapse_session(root: Path) -> Iterator[Homeserver]:
    server = start_homeserver(root)
    try:
        yield server
    finally:
        stop_homeserver(server.process)


# --------------------------------------------------------------------------- the sender


Event = dict[str, Any]


class MatrixUser:
    """A person on the homeserver: creates rooms, invites, sends text, and waits (by
    long-polling /sync) for the events others send."""

    def __init__(self, url: str, user_id: str, token: str) -> None:
        self.url = url
        self.user_id = user_id
        self.http = httpx.AsyncClient(
            base_url=url, timeout=PATIENCE, headers={"authorization": f"Bearer {token}"}
        )
        self.since: str | None = None
        self.seen: list[tuple[str, Event]] = []  # (room, event) in the order they came
        self.invites: list[str] = []

    async def aclose(self) -> None:
        await self.http.aclose()

    async def create_room(self, *, invite: list[str] = (), encrypted: bool = False) -> str:  # type: ignore[assignment]
        body: dict[str, Any] = {"preset": "private_chat", "invite": list(invite)}
        if encrypted:
            body["initial_state"] = [
                {
                    "type": "m.room.encryption",
                    "state_key": "",
                    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                }
            ]
        answer = await self.http.post("/_matrix/client/v3/createRoom", json=body)
        answer.raise_for_status()
        return str(answer.json()["room_id"])

    async def invite(self, room_id: str, user_id: str) -> None:
        answer = await self.http.post(
            f"/_matrix/client/v3/rooms/{room_id}/invite", json={"user_id": user_id}
        )
        answer.raise_for_status()

    async def join(self, room_id: str) -> None:
        answer = await self.http.post(f"/_matrix/client/v3/join/{room_id}", json={})
        answer.raise_for_status()

    async def send(self, room_id: str, text: str) -> str:
        txn = secrets.token_hex(8)
        answer = await self.http.put(
            f"/_matrix/client/v3/rooms/{room_id}/send/m.room.message/{txn}",
            json={"msgtype": "m.text", "body": text},
        )
        answer.raise_for_status()
        return str(answer.json()["event_id"])

    async def sync_once(self, timeout_ms: int = 10_000) -> None:
        params = {"timeout": str(timeout_ms)}
        if self.since is not None:
            params["since"] = self.since
        answer = await self.http.get("/_matrix/client/v3/sync", params=params)
        answer.raise_for_status()
        body = answer.json()
        self.since = body["next_batch"]
        rooms = body.get("rooms", {})
        for room_id, joined in rooms.get("join", {}).items():
            for event in joined.get("timeline", {}).get("events", []):
                self.seen.append((room_id, event))
        for room_id, left in rooms.get("leave", {}).items():
            for event in left.get("timeline", {}).get("events", []):
                self.seen.append((room_id, event))
        self.invites.extend(rooms.get("invite", {}))

    async def wait_for(
        self, room_id: str, match: Callable[[Event], bool], *, after: int = 0
    ) -> Event:
        """The first event in `room_id` (from the `after`-th seen on) that matches,
        syncing until it comes (the caller bounds the wait)."""
        start = after
        while True:
            for room, event in self.seen[start:]:
                if room == room_id and match(event):
                    return event
            start = len(self.seen)
            await self.sync_once()
            await trio.lowlevel.checkpoint()

    def mark(self) -> int:
        """Where `wait_for(after=...)` should look from: after everything seen so far."""
        return len(self.seen)


def is_member(user_id: str, membership: str) -> Callable[[Event], bool]:
    def match(event: Event) -> bool:
        return (
            event.get("type") == "m.room.member"
            and event.get("state_key") == user_id
            and event.get("content", {}).get("membership") == membership
        )

    return match


def is_notice_from(user_id: str, contains: str = "") -> Callable[[Event], bool]:
    def match(event: Event) -> bool:
        content = event.get("content", {})
        return (
            event.get("type") == "m.room.message"
            and event.get("sender") == user_id
            and content.get("msgtype") == "m.notice"
            and "m.relates_to" not in content
            and contains in content.get("body", "")
        )

    return match


def is_reply_to(user_id: str, event_id: str) -> Callable[[Event], bool]:
    """A notice of `user_id` in reply to the message `event_id`."""

    def match(event: Event) -> bool:
        content = event.get("content", {})
        replied = content.get("m.relates_to", {}).get("m.in_reply_to", {})
        return (
            event.get("sender") == user_id
            and content.get("msgtype") == "m.notice"
            and replied.get("event_id") == event_id
        )

    return match


def is_edit_of(event_id: str, contains: str = "") -> Callable[[Event], bool]:
    def match(event: Event) -> bool:
        content = event.get("content", {})
        relates = content.get("m.relates_to", {})
        new = content.get("m.new_content", {})
        return (
            relates.get("rel_type") == "m.replace"
            and relates.get("event_id") == event_id
            and contains in new.get("body", "")
        )

    return match
