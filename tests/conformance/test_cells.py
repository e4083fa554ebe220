"""Every declared cell, driven on its path: the pure policy, the conformance daemon
(offline grammar through the control socket, the CLI), the probe agents (kernel, raw bus
requests), another uid on the control socket, rogue router clients, and `chat -m` with no
daemon."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import zmq

from tests.conformance._matrix import PROFILES, Cell, Observed, cells_on
from tests.conformance._table import record
from tests.conformance._world import (
    TG_APPROVER,
    TG_SENDER,
    TG_STRANGER,
    World,
    observed_from_turn,
)
from tests.known_secrets import API_TOKEN, HOOK_SECRET
from zeroclaw.agent import path_rules
from zeroclaw.bus import PROTOCOL_VERSION
from zeroclaw.config import load_config
from zeroclaw.control import (  # noqa: F401  (kept for the reader)
    MCP_REQUEST_TYPES,
    REQUEST_TYPES,
    SCHEDULE_REQUEST_TYPES,
    SUBAGENT_REQUEST_TYPES,
    Chat,
    ControlClient,
    ControlSession,
    encode,
    error_reply,
)
from zeroclaw.policy import abi_version, check_path
from zeroclaw.supervisor import build_specs
from zeroclaw.tools import decide_shell


def ids(cells: list[Cell]) -> list[str]:
    return [f"{c.profile}:{c.case}".encode("unicode_escape").decode()[:90] for c in cells]


def _params(path: str) -> pytest.MarkDecorator:
    cells = cells_on(path)
    return pytest.mark.parametrize("cell", cells, ids=ids(cells))


# ------------------------------------------------------------------ pure policy, corpus

POLICY_COMMANDS = frozenset({"ls", "cat", "find", "xargs", "less", "tar", "env", "git"})


@pytest.fixture(scope="module")
def specs(world: World) -> dict[str, Any]:
    config = load_config(world.config_path)
    return build_specs(config, dict(os.environ), world.root, config_path=world.config_path)


@_params("policy")
def test_policy(cell: Cell, world: World, specs: dict[str, Any]) -> None:
    alias = PROFILES[cell.profile][0]
    spec = specs[alias]
    rules = path_rules(spec)
    with open(world.root / "outside" / "forbidden" / "key") as held:
        fd_path = f"/proc/self/fd/{held.fileno()}"
        text = world.fill(cell.action, alias).replace("{fd_forbidden}", fd_path)
        if cell.tool == "shell":
            decision = decide_shell(
                text,
                allowed_commands=POLICY_COMMANDS,
                may_run_shell=spec.risk.may_act,
                block_high_risk=True,
                asks_approval=spec.risk.level == "supervised",
                check_path=lambda p, a: check_path(rules, p, a),
            )
            observed = (
                Observed("refused", decision.code, decision.reason)
                if decision.verdict == "refuse"
                else Observed("allowed", None, decision.verdict)
            )
        else:
            access = cell.extra.get("access", "read")
            got = check_path(rules, text, access)
            observed = (
                Observed("allowed", None, got.reason)
                if got.allowed
                else Observed("refused", got.code, got.reason)
            )
    record(cell, observed)


# ------------------------------------------------------------------ the daemon's agents


@pytest.fixture(scope="module")
def adapters_registered(world: World) -> World:
    """The daemon's first discovery scan registered the manifests beside the config."""
    from tests.discovery.test_discovery_daemon import follow_discovery

    assert world.daemon is not None
    follow_discovery(
        world.daemon, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, "added", "writer"
    )
    return world


def _needs_code_kind(cell: Cell, world: World) -> None:
    """A daemon-code cell whose kind this installation has no path of (no editable
    install, say) has nothing to attack."""
    kind = cell.extra.get("code_kind")
    if kind and kind not in world.code:
        pytest.skip(f"the daemon found no {kind} code path on this installation")


@_params("grammar/daemon")
def test_grammar_through_the_daemon(
    cell: Cell, world: World, request: pytest.FixtureRequest
) -> None:
    if cell.tool == "invoke_adapter":
        request.getfixturevalue("adapters_registered")
    _needs_code_kind(cell, world)
    alias = PROFILES[cell.profile][0]
    data = world.chat(cell.profile, world.fill(cell.action, alias))
    record(cell, observed_from_turn(cell, data))


@_params("cli")
def test_cli_chat_json(cell: Cell, world: World) -> None:
    alias = PROFILES[cell.profile][0]
    result = world.cli("--agent", alias, "chat", "-m", world.fill(cell.action, alias), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1
    record(cell, observed_from_turn(cell, data))


def _word(word: str, cell: Cell) -> Observed:
    if word == "ok":
        return Observed("allowed")
    if word in ("forgotten_false", "acted_once", "answered_to_sender"):
        return Observed("allowed", word)
    if word in ("EACCES", "EPERM"):
        return Observed("kernel_denied", word)
    return Observed("refused", word)


def _confinement_word(word: str) -> Observed:
    if word == "none":
        return Observed("kernel_denied", "no_capabilities")
    if word == "some":
        return Observed("allowed", "capabilities_held")
    if word == "ok":
        return Observed("allowed")
    if word in ("EPERM", "EACCES"):
        return Observed("kernel_denied", word)
    return Observed("refused", word)


@pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")
@_params("kernel")
def test_kernel_from_inside_the_agent(cell: Cell, world: World) -> None:
    _needs_code_kind(cell, world)
    results = world.kernel_results(cell.profile)
    kind = cell.extra.get("kind")
    if kind is not None:  # ADR 0043: the agent process itself, or a command of it
        seen = results["confinement" if kind == "agent" else "command_confinement"]
        record(cell, _confinement_word(seen[cell.action]))
        return
    key = cell.action if cell.action in ("control", "env_secret") else cell.case
    record(cell, _word(results[key], cell))


@_params("memory_service")
def test_raw_memory_requests_of_a_hostile_agent(cell: Cell, world: World) -> None:
    results = world.kernel_results(cell.profile)
    if cell.action in ("replay_store", "forged_rid"):
        record(cell, _replayed_or_forged_store(cell.action, world, results))
        return
    observed = _word(results[cell.action], cell)
    if cell.action == "forget_foreign_id":
        still = world.memory("get", "owner", key="ownersecret")["record"]
        if still is None:
            observed = Observed("allowed", None, "the owner's record is gone")
    if cell.action == "store_foreign" and observed.kind == "allowed":
        landed = world.memory("get", "owner", key="raw")["record"]
        if landed is None:  # answered ok, but written to the sender's own namespace
            observed = Observed("refused", "own_namespace_only")
    record(cell, observed)


def _replayed_or_forged_store(action: str, world: World, results: dict[str, Any]) -> Observed:
    """Where k_sup's replayed / forged-routing-id stores landed (read as the operator)."""
    alias = "k_sup"
    if action == "replay_store":
        records = world.memory("list", alias, limit=100)["records"]
        same = [r for r in records if r["key"] == "replayed"]
        return (
            Observed("allowed", "stored_once")
            if len(same) == 1
            else Observed("refused", f"stored_{len(same)}_times")
        )
    if world.memory("get", "owner", key="forged-rid")["record"] is not None:
        return Observed("allowed", "acted_for_owner", "landed in owner's namespace")
    own = world.memory("get", alias, key="forged-rid")["record"] is not None
    detail = f"answer {results['forged_rid_answer']}; in {alias}'s own namespace: {own}"
    return Observed("refused", "own_identity", detail)


# ------------------------------------------------------------------ in-process (no daemon)


@_params("grammar/in_process")
def test_grammar_in_process(cell: Cell, offline_world: World) -> None:
    alias = PROFILES[cell.profile][0]
    text = offline_world.fill(cell.action, alias)
    if cell.expect.code == "under_landlock":  # the human run's fallback line on stderr
        human = offline_world.cli("--agent", alias, "chat", "-m", text)
        said = "under_landlock" if "under Landlock" in human.stderr else "not_said"
        kind = "allowed" if human.returncode == 0 else "refused"
        record(cell, Observed(kind, said, human.stderr[-200:]))
        return
    if cell.expect.code == "sandbox_unavailable":
        record(cell, _chat_without_landlock(offline_world, alias, text))
        return
    result = offline_world.cli("--agent", alias, "chat", "-m", text, "--json")
    assert "in-process" in result.stderr, result.stderr
    if result.returncode != 0:
        code = json.loads(result.stdout or "{}").get("error", {}).get("code", "exit")
        record(cell, Observed("refused", str(code), result.stderr[-200:]))
        return
    data = json.loads(result.stdout)
    if cell.expect.code == "sandbox_in_force":
        in_force = data.get("sandbox_in_force")
        record(
            cell,
            Observed("allowed", "sandbox_in_force")
            if in_force is True
            else Observed("refused", "sandbox_not_in_force", repr(in_force)),
        )
        return
    record(cell, observed_from_turn(cell, data))


def _chat_without_landlock(world: World, alias: str, text: str) -> Observed:
    """`chat -m --json` with the agent's profile requiring Landlock, in a CLI process where
    landlock_create_ruleset fails (ENOSYS, as on a kernel without it)."""
    import subprocess
    import sys

    import tomli_w

    from tests.cli.test_chat_sandbox import WITHOUT_LANDLOCK
    from tests.conftest import REPO

    doc = json.loads(json.dumps(world.doc))
    profile = doc["agents"][alias]["risk_profile"]
    doc["risk_profiles"][profile]["sandbox"] = "landlock"
    config = world.root / "landlock-required.toml"
    config.write_text(tomli_w.dumps(doc))
    argv = ["--config", str(config), "--agent", alias, "chat", "-m", text, "--json"]
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_LANDLOCK, *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
        timeout=120,
    )
    made = (world.root / "state" / "agents" / alias / "workspace" / "no-landlock.txt").exists()
    if result.returncode != 1 or made:
        return Observed("allowed", None, f"exit {result.returncode}, file made: {made}")
    code = json.loads(result.stdout or "{}").get("error", {}).get("code", "no_code")
    return Observed("refused", str(code), result.stderr[-200:])


# ------------------------------------------------------------------ control socket, other uid


def _ask_as(uid: int, address: str, payload: bytes) -> str:
    """Send one control request from a forked child running as `uid`; its answer."""
    from zeroclaw.control import FrameDecoder, decode_reply, encode_frame

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to uid, knock, report, exit without cleanup
        os.close(read)
        answer = "no_reply"
        try:
            os.setgid(uid)
            os.setuid(uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(10)
                s.connect(address)
                # Refused at accept: the daemon may have closed already; its reply waits.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    s.sendall(encode_frame(payload))
                decoder = FrameDecoder(1 << 20)
                frames: list[bytes] = []
                while not frames and (chunk := s.recv(65536)):
                    frames += decoder.feed(chunk)
                if frames:
                    reply = decode_reply(frames[0])
                    answer = "ok" if reply.ok else str(reply.error)
        except OSError as exc:
            answer = errno.errorcode.get(exc.errno or 0, "oserror")
        except BaseException:
            answer = "error"
        os.write(write, answer.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        answer = fh.read().decode()
    os.waitpid(pid, 0)
    return answer


_REQUESTS = {
    t.__struct_config__.tag: t
    for t in (*REQUEST_TYPES, *SUBAGENT_REQUEST_TYPES, *MCP_REQUEST_TYPES, *SCHEDULE_REQUEST_TYPES)
}


def _minimal(tag: str) -> bytes:
    """The smallest frame naming this command (its fields need not be valid: the refusal
    comes at accept time, before the request is read)."""
    import msgspec

    return msgspec.msgpack.encode({"cmd": tag})


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another uid needs root")
@_params("control_socket")
def test_control_socket_from_another_uid(cell: Cell, world: World) -> None:
    from zeroclaw.control import control_address

    assert cell.action in _REQUESTS
    answer = _ask_as(65534, control_address(world.run_dir), _minimal(cell.action))
    observed = Observed("allowed") if answer == "ok" else Observed("refused", answer)
    record(cell, observed)


# ------------------------------------------------------------------ rogue router clients


def _rogue_frame(kind: str) -> list[bytes]:
    import msgspec

    if kind == "garbage":
        return [b"\xc1\xff\x00garbage"]
    if kind == "oversized":
        return [b"\x00" * (8 << 20)]
    if kind == "forged_sender":
        return [msgspec.msgpack.encode({"t": "send", "from": "owner", "to": "sup", "body": "x"})]
    return [msgspec.msgpack.encode({"t": "hello", "v": PROTOCOL_VERSION, "pid": 1})]


@pytest.fixture(scope="module")
def rogues(world: World) -> dict[str, bool]:
    """Every unauthenticated router cell's frame, each from its own client without the
    daemon's CURVE keys, all at once; then whether anything came back to each."""
    import msgspec

    assert world.daemon is not None
    cells = [c for c in cells_on("router") if c.profile == "unauthenticated"]
    router = world.daemon.status()["router"]
    before = router["refused_connections"]["handshake_failed"]
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    sockets = {}
    for cell in cells:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        # Never block: a client whose handshake fails has no pipe to queue into.
        sock.setsockopt(zmq.SNDTIMEO, 0)
        sock.setsockopt(zmq.IDENTITY, b"owner")  # claims a real alias as its routing id
        sock.connect(router["endpoint"])
        if cell.extra:
            with contextlib.suppress(zmq.Again):
                sock.send_multipart(_rogue_frame(cell.extra["frame"]))
        else:  # a service request, as an agent would send it
            frame = {"t": "request", "id": "1", "service": cell.action, "op": "x", "body": None}
            with contextlib.suppress(zmq.Again):
                sock.send(msgspec.msgpack.encode(frame))
        sockets[cell.key] = sock
    world.daemon.wait_for(
        lambda st: st["router"]["refused_connections"]["handshake_failed"] >= before + len(cells)
    )
    try:
        return {key: sock.poll(200) != 0 for key, sock in sockets.items()}
    finally:
        for sock in sockets.values():
            sock.close()


@_params("router")
def test_router_refuses_unauthenticated_and_forged_frames(
    cell: Cell, world: World, request: pytest.FixtureRequest
) -> None:
    if cell.profile != "unauthenticated":
        results = world.kernel_results(cell.profile)  # forged frames from a real agent
        record(cell, _word(results[cell.action], cell))
        return
    answered = request.getfixturevalue("rogues")[cell.key]
    observed = (
        Observed("allowed", None, "the router answered")
        if answered
        else Observed("refused", "no_handshake", "handshake refused, nothing came back")
    )
    record(cell, observed)


# ------------------------------------------------------------------ channels


def _signed(body: bytes, secret: str, stamp: str) -> dict[str, str]:
    from zeroclaw.channels._webhook_core import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

    return {
        TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: sign(secret.encode(), stamp, body),
        "content-type": "application/json",
    }


def _webhook_turn(world: World, cell: Cell, approve: bool | None) -> dict[str, Any]:
    import time

    import httpx

    from tests.known_secrets import HOOK_SECRET

    base = f"http://127.0.0.1:{world.port}"
    text = world.fill(cell.action, "sup")
    # One sender per cell: two cells with the same text in the same second would otherwise
    # sign the same bytes, and the channel rightly refuses the second as a replay.
    sender = "conformance-" + re.sub(r"\W+", "-", f"{cell.profile}-{cell.case}")
    body = json.dumps({"sender": sender, "text": text}).encode()
    stamp = str(int(time.time()))
    secret = "not-the-secret" if cell.action == "wrong_secret" else HOOK_SECRET
    headers = {"content-type": "application/json"}
    if cell.action != "unsigned":
        headers = _signed(body, secret, stamp)
    url = f"{base}/v1/channels/hook/messages"
    answer = httpx.post(url, content=body, headers=headers, timeout=60)
    if cell.action == "replay":
        answer = httpx.post(url, content=body, headers=headers, timeout=60)
    if answer.status_code == 202:  # waits for an approval, given on its own signed request
        pending = answer.json()
        verdict = json.dumps({"approved": bool(approve)}).encode()
        given = httpx.post(
            f"{base}/v1/channels/hook/approvals/{pending['approval_id']}",
            content=verdict,
            headers=_signed(verdict, HOOK_SECRET, str(int(time.time()))),
            timeout=30,
        )
        assert given.status_code == 200, given.text
        status_url = pending["status_url"]
        answer = httpx.get(
            f"{base}{status_url}?wait=30",
            headers=_signed(status_url.encode(), HOOK_SECRET, str(int(time.time()))),
            timeout=60,
        )
    if answer.status_code != 200:
        return {"refused": answer.json().get("error", str(answer.status_code))}
    return answer.json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def serving(world: World) -> World:
    assert world.daemon is not None
    wanted = {"webhook.hook", "serial.desk", "telegram.phone", "telegram.hooked", "gateway"}
    world.daemon.wait_for(
        lambda st: (
            wanted
            <= {k for c in st.get("channels", []) if c["state"] == "serving" for k in c["keys"]}
        )
    )
    return world


@_params("webhook")
def test_webhook_channel(cell: Cell, serving: World) -> None:
    approve = PROFILES[cell.profile][1]
    record(cell, observed_from_turn(cell, _webhook_turn(serving, cell, approve)))


_REFUSED = re.compile(r"^(\w+) refused: (\w+)")


@_params("serial")
def test_serial_channel(cell: Cell, serving: World) -> None:
    device = serving.device
    assert device is not None
    device.send(serving.fill(cell.action, "sup"))
    line = device.line()
    if line.startswith("approve "):
        device.send("y" if PROFILES[cell.profile][1] else "n")
        line = device.line()
    match = _REFUSED.match(line)
    observed = (
        Observed("refused", match.group(2), line[:200])
        if match
        else Observed("allowed", None, line)
    )
    record(cell, observed)


def _bot(world: World, what: str, **params: Any) -> dict[str, Any]:
    """The fake Bot API's control (tests/channels/fake_bot_api.py): Telegram's side."""
    url = f"http://127.0.0.1:{world.bot_port}/_test/{what}"
    answer: dict[str, Any] = httpx.post(url, json=params, timeout=120).json()
    return answer


@_params("telegram")
def test_telegram_channel(cell: Cell, serving: World) -> None:
    """A user writes to the bot; an approval is answered with the buttons, by the approver
    as the profile says (after a stranger's press, in the non-approver cell); the observed
    outcome is the reply's (or the refusal's, or the press's) word."""
    stranger = cell.case == "telegram sender no group admits"
    user = TG_STRANGER if stranger else TG_SENDER
    said = [c for c in _bot(serving, "calls")["calls"] if c["method"] != "getUpdates"]
    seen = sum(c["method"] in ("sendMessage", "answerCallbackQuery") for c in said)

    def next_word(method: str | None = None) -> dict[str, Any]:
        """The bot's next sendMessage or press answer (of `method`, skipping others, and
        skipping the approval's copies in the approvers' own chats)."""
        nonlocal seen
        while True:
            word = _bot(serving, "next", after=seen)
            assert word, "the bot said nothing in 60 s"
            seen += 1
            copy = word["method"] == "sendMessage" and word["params"]["chat_id"] != user["id"]
            if not copy and method in (None, word["method"]):
                return word

    _bot(serving, "message", user=user, text=serving.fill(cell.action, "sup"))
    word = next_word()
    observed: Observed | None = None
    if "reply_markup" in word["params"]:
        buttons = word["params"]["reply_markup"]["inline_keyboard"][0]
        message_id = word["result"]["message_id"]
        approve = PROFILES[cell.profile][1]
        if cell.case == "telegram approval pressed by a non-approver":
            pressed = buttons[0]["callback_data"]
            _bot(
                serving,
                "press",
                user=TG_STRANGER,
                data=pressed,
                chat_id=user["id"],
                message_id=message_id,
            )
            answer = next_word("answerCallbackQuery")["params"]
            observed = (
                Observed("refused", "not_an_approver", answer["text"])
                if answer["show_alert"] and "approvers" in answer["text"]
                else Observed("allowed", None, answer["text"])
            )
        pressed = buttons[0 if approve else 1]["callback_data"]
        _bot(
            serving,
            "press",
            user=TG_APPROVER,
            data=pressed,
            chat_id=user["id"],
            message_id=message_id,
        )
        word = next_word("sendMessage")
    line = word["params"]["text"]
    if observed is None:
        match = _REFUSED.match(line)
        if match:
            observed = Observed("refused", match.group(2), line[:200])
        elif "does not take messages" in line:
            observed = Observed("refused", "sender_not_accepted", line[:200])
        else:
            observed = Observed("allowed", None, line[:200])
    record(cell, observed)


def _hook_bot(world: World, what: str, **params: Any) -> dict[str, Any]:
    """The webhook-mode bot's fake Bot API (its own token): Telegram's side."""
    url = f"http://127.0.0.1:{world.hook_bot_port}/_test/{what}"
    answer: dict[str, Any] = httpx.post(url, json=params, timeout=120).json()
    return answer


@_params("telegram_webhook")
def test_telegram_webhook(cell: Cell, serving: World) -> None:
    """Updates POSTed to the gateway as Telegram would, with or without the secret token
    the bot gave setWebhook; a replayed update, and a stranger's, with the right one. The
    observed outcome: the gateway's refusal code, or what the bot did with the update."""
    calls = _hook_bot(serving, "calls")["calls"]
    secret = [c for c in calls if c["method"] == "setWebhook"][-1]["params"]["secret_token"]
    base = f"http://127.0.0.1:{serving.gateway_port}/telegram/"
    user = TG_STRANGER if cell.action == "stranger" else TG_SENDER

    def update(text: str) -> dict[str, Any]:
        _hook_bot(serving, "message", user=user, text=text)
        [pushed] = _hook_bot(serving, "pushed")["updates"]
        return pushed

    def post(body: dict[str, Any], token: str | None, alias: str = "hooked") -> httpx.Response:
        headers = {} if token is None else {"X-Telegram-Bot-Api-Secret-Token": token}
        return httpx.post(base + alias, json=body, headers=headers, timeout=60)

    def reply_to(message_id: int) -> list[dict[str, Any]]:
        """The bot's replies to one message, once one came (waits for it)."""
        seen = 0
        while True:
            word = _hook_bot(serving, "next", after=seen)
            assert word, "the bot said nothing in 60 s"
            seen += 1
            if word["params"].get("reply_parameters", {}).get("message_id") == message_id:
                break
        sent = [c["params"] for c in _hook_bot(serving, "calls")["calls"]]
        return [p for p in sent if p.get("reply_parameters", {}).get("message_id") == message_id]

    first = update("hello by webhook")
    if cell.action in ("no_secret", "wrong_secret", "other_path"):
        token = {"no_secret": None, "wrong_secret": secret[::-1], "other_path": secret}
        answer = post(
            first, token[cell.action], "phone" if cell.action == "other_path" else "hooked"
        )
        observed = (
            Observed("refused", answer.json()["error"]["code"], answer.text[:200])
            if answer.status_code >= 400
            else Observed("allowed", None, f"HTTP {answer.status_code}")
        )
    elif cell.action == "replay":
        message_id = first["message"]["message_id"]
        assert post(first, secret).status_code == 200
        assert post(first, secret).status_code == 200
        later = update("after the replay")
        assert post(later, secret).status_code == 200
        reply_to(later["message"]["message_id"])  # a second turn on `first` came before
        replies = reply_to(message_id)
        observed = (
            Observed("refused", "repeated", f"{len(replies)} reply")
            if len(replies) == 1
            else Observed("allowed", None, f"{len(replies)} replies")
        )
    else:
        assert post(first, secret).status_code == 200
        [line] = reply_to(first["message"]["message_id"])
        observed = (
            Observed("refused", "sender_not_accepted", line["text"][:200])
            if "does not take messages" in line["text"]
            else Observed("allowed", None, line["text"][:200])
        )
    record(cell, observed)


@_params("cli/daemon")
def test_operator_outputs_carry_no_secret(cell: Cell, world: World) -> None:
    from tests.known_secrets import secrets_in

    assert world.daemon is not None
    if cell.action == "daemon log (debug)":
        text = world.daemon.log_text()
    else:
        result = world.cli(*cell.action.split())
        assert result.returncode == 0, result.stderr
        # status is one document, events one per line: each carries schema_version
        for line in (
            result.stdout.splitlines() if cell.action.startswith("events") else [result.stdout]
        ):
            assert json.loads(line)["schema_version"] >= 1
        text = result.stdout + result.stderr
    found = secrets_in(text)
    record(
        cell,
        Observed("allowed", "secret", str(found)) if found else Observed("refused", "no_secret"),
    )


_RUNTIME_SEEN: dict[str, dict[str, str]] = {}


def _runtime_confinement(world: World) -> dict[str, str]:
    """One invocation of `prober`, whose runtime reports what it reached (ADR 0043)."""
    if "prober" not in _RUNTIME_SEEN:
        t = world.targets()
        task = f"targets {t['daemon']} {t['zygote']} {t['sibling']} {world.tcp_port}"
        result = world.cli("dispatch", "prober", "--task", task, "--json", timeout=120)
        record_ = json.loads(result.stdout)["invocation"]
        assert record_["state"] == "succeeded", record_
        _RUNTIME_SEEN["prober"] = record_["output"]
    return _RUNTIME_SEEN["prober"]


_PROBE_SEEN: dict[str, dict[str, str]] = {}


def _probe_confinement(world: World, tmp: Path) -> dict[str, str]:
    """A program run under the probe sandbox (the daemon's discovery `--version` probes:
    policy.decide_confinement("probe") and the command ruleset), started from outside
    every agent as the daemon starts it."""
    import functools

    import trio

    from tests.conformance._agent import program_probes
    from zeroclaw.policy import (
        build_ruleset,
        cap_last_cap,
        command_executables,
        decide_confinement,
        plan_command_sandbox,
    )

    if "probe" not in _PROBE_SEEN:
        confinement = decide_confinement("probe", abi_version(), cap_last_cap=cap_last_cap())
        path = os.environ.get("PATH", "/usr/bin:/bin")

        def ruleset_for(names: list[str]) -> int:
            plan = plan_command_sandbox(
                workspace=str(tmp), home=str(tmp), executables=command_executables(names, path)
            )
            return build_ruleset(plan, confinement)

        targets, port = world.targets(), world.tcp_port
        _PROBE_SEEN["probe"] = trio.run(
            functools.partial(program_probes, ruleset_for, targets, port)
        )
    return _PROBE_SEEN["probe"]


@pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")
@_params("discovery_probe")
def test_probe_confinement(cell: Cell, world: World, tmp_path: Path) -> None:
    record(cell, _confinement_word(_probe_confinement(world, tmp_path)[cell.action]))


@_params("subagent_runtime")
def test_subagent_runtime_tools(cell: Cell, world: World) -> None:
    if cell.extra.get("kind") is not None:  # ADR 0043: the runtime process itself
        record(cell, _confinement_word(_runtime_confinement(world)[cell.action]))
        return
    result = world.cli(
        "dispatch", "helper", "--task", world.fill(cell.action, "sup"), "--json", timeout=120
    )
    invocation = json.loads(result.stdout)["invocation"]["id"]
    events = world.cli("invocations", "events", invocation, "--json")
    assert events.returncode == 0, events.stderr
    bodies = [json.loads(line)["body"] for line in events.stdout.splitlines()]
    tools = [b for b in bodies if b["kind"] == "tool" and b["name"] == cell.tool]
    assert tools, bodies
    first = tools[0]
    record(
        cell,
        Observed("allowed") if first["ok"] else Observed("refused", first["error_code"]),
    )


def test_the_root_is_short_enough_for_sockets(world: World) -> None:
    assert len(str(Path(world.run_dir))) < 60


# ------------------------------------------------------------------ sessions by origin

# What each kind of session of sup holds: said there before any session cell runs.
SESSION_MARKS = {
    "operator_default": "operator-mark-7310",  # the operator, in sup's `default`
    "peer": "owner-asked-mark-4402",  # owner asked sup (sup's session for peer owner)
    "other_sender": "other-sender-mark-9911",  # webhook sender `other`, its own session
}
OWN_MARKS = {  # each driving origin's own earlier words, by `via`
    "cli": SESSION_MARKS["operator_default"],
    "webhook": "probe-sender-mark-2218",
    "serial": "serial-line-mark-6604",
    "ask": "ro-asked-mark-5127",
    "api": "api-client-mark-3391",
}


def _api_reply(world: World, text: str, session: str | None = None) -> str:
    """sup's reply to the gateway token `probe`, through the official OpenAI SDK; the
    session is the request's `user` field."""
    import openai

    api = openai.OpenAI(
        api_key=API_TOKEN, base_url=f"http://127.0.0.1:{world.gateway_port}/v1", max_retries=0
    )
    answer = api.chat.completions.create(
        model="sup",
        messages=[{"role": "user", "content": text}],
        user=session or openai.NOT_GIVEN,
        timeout=60,
    )
    return answer.choices[0].message.content or ""


def _hook_reply(world: World, sender: str, text: str, session: str | None = None) -> str:
    payload: dict[str, Any] = {"sender": sender, "text": text}
    if session is not None:
        payload["session"] = session
    body = json.dumps(payload).encode()
    answer = httpx.post(
        f"http://127.0.0.1:{world.port}/v1/channels/hook/messages",
        content=body,
        headers=_signed(body, HOOK_SECRET, str(int(time.time()))),
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["reply"])


def _serial_reply(world: World, text: str, end: str) -> str:
    """The device's lines for `text`, up to the reply to the sentinel line `end`."""
    device = world.device
    assert device is not None
    device.send(text)
    device.send(end)
    lines = []
    while f"heard: {end}" not in (line := device.line()):
        lines.append(line)
    return "\n".join(lines)


def _operator_turn(world: World, session: str, text: str) -> dict[str, Any]:
    with ControlSession(world.run_dir, timeout=60) as control:
        control.send(Chat(agent="sup", text=text, session=session))
        for reply in control.replies():
            if not reply.ok:
                return {"refused": reply.error}
            if not reply.more:
                return reply.data or {}
    raise AssertionError("the chat ended without a final reply")


@pytest.fixture(scope="module")
def sessions_said(serving: World) -> dict[str, str]:
    """Every kind of session of sup holds its marker; answers the stored keys by kind."""
    world = serving
    assert world.daemon is not None
    _operator_turn(world, "default", f"said {SESSION_MARKS['operator_default']}")
    owner = world.chat("supervised_approve", "noop")  # sup up; owner asks through the bus
    assert "refused" not in owner, owner
    asked = ControlClient(world.run_dir).request(
        Chat(agent="owner", text=f"ask sup: {SESSION_MARKS['peer']}", session="conformance")
    )
    assert asked.ok, asked
    assert "refused" not in world.chat("readonly", f"ask sup: {OWN_MARKS['ask']}")
    _hook_reply(world, "other", f"said {SESSION_MARKS['other_sender']}")
    _hook_reply(world, "probe", f"said {OWN_MARKS['webhook']}")
    _serial_reply(world, f"said {OWN_MARKS['serial']}", "end-plant")
    _api_reply(world, f"said {OWN_MARKS['api']}")
    listed = world.cli("sessions", "list", "--agent", "sup", "--json")
    assert listed.returncode == 0, listed.stderr
    keys = {s["who"]: s["session"] for s in json.loads(listed.stdout)["sessions"]}
    return {
        "operator_default": "default",
        "peer": keys["peer:owner"],
        "other_sender": keys["webhook.hook:other"],
    }


def _session_observed(reply: str, mark: str, own: bool) -> Observed:
    seen = mark in reply
    if own:
        return (
            Observed("allowed", None, reply[:120])
            if seen
            else Observed("refused", "not_in_reply", reply[:200])
        )
    return (
        Observed("allowed", "leaked", reply[:200])
        if seen
        else Observed("refused", "own_session_only")
    )


@_params("sessions")
def test_session_transcripts(cell: Cell, serving: World, sessions_said: dict[str, str]) -> None:
    from zeroclaw.bus import Origin, session_key

    via, kind = cell.extra["via"], cell.extra["session_kind"]
    own = kind == "own"
    mark = OWN_MARKS.get(via, "") if own else SESSION_MARKS[kind]
    # The name an attacker sends: the stored key itself (its own default when `own`).
    name = None if own else sessions_said[kind]
    world = serving
    if via == "cli":
        data = _operator_turn(world, name or "default", "history")
        if "refused" in data:
            record(cell, Observed("refused", str(data["refused"])))
            return
        observed = _session_observed(
            str(data.get("reply", "")), mark, own or kind == "operator_default"
        )
    elif via == "webhook":
        observed = _session_observed(_hook_reply(world, "probe", "history", name), mark, own)
    elif via == "serial":  # a line names no session at all
        observed = _session_observed(_serial_reply(world, "history", f"end-{kind}"), mark, own)
    elif via == "api":  # the `user` field, inside the token's namespace
        observed = _session_observed(_api_reply(world, "history", name), mark, own)
    elif via == "ask":  # a peer names no session: the router stamps the asker's
        data = world.chat(cell.profile, "ask sup: history")
        observed = _session_observed(str(data.get("reply", "")), mark, own)
    else:  # via "key" / "schedule": what a runtime's (a schedule's) turn would use
        origin = Origin.subagent("sup") if via == "key" else Origin.schedule("sup", "probe")
        namespace = "subagent:sup/" if via == "key" else "schedule:sup.probe/"
        key = session_key(origin, name)
        if own:
            observed = (
                Observed("allowed")
                if key.startswith(namespace)
                else Observed("refused", "foreign_key")
            )
        else:
            observed = (
                Observed("allowed", "leaked")
                if key == sessions_said[kind]
                else Observed("refused", "own_session_only")
            )
    record(cell, observed)
