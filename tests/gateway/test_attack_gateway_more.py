"""A second attack pass on the gateway, through a real daemon, with what a loopback client,
a key holder or another site's page can do: a request pipelined behind another and then
abandoned, a dashboard event stream that outlives its sign-in, and a page that reaches the
loopback listener under another host name (DNS rebinding)."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import PATIENCE
from tests.gateway.helpers import (
    ENV,
    approvals,
    free_port,
    gateway_config,
    gateway_daemon,
    sign_in,
    wait_until,
)
from tests.known_secrets import API_TOKEN
from tests.supervisor.harness import Daemon, remove_root, short_root

Gateway = tuple[Daemon, int]


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    with gateway_daemon() as running:
        yield running


def chat_request(text: str) -> bytes:
    body = json.dumps({"model": "alpha", "messages": [{"role": "user", "content": text}]})
    return (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        f"authorization: Bearer {API_TOKEN}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n{body}"
    ).encode()


def test_a_pipelined_client_that_goes_away_still_cancels_its_turn(gateway: Gateway) -> None:
    """A second request sent behind the first makes hypercorn stop reading until the first
    is answered: the client's leaving must be noticed all the same, or its turn (and the
    approval it waits for) runs on to max_turn_secs for nobody."""
    daemon, port = gateway
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        sock.sendall(chat_request("write piped.txt: never") + b"GET /v1/models HTTP/1.1\r\n")
        wait_until(lambda: approvals(daemon), "the write's approval in the queue")
    wait_until(lambda: not approvals(daemon), "the abandoned approval leaves the queue")
    events = daemon.cli("events", "--json", "--kind", "approval")
    assert '"abandoned"' in events.stdout, events.stdout[-2000:]
    assert not (daemon.root / "ws-alpha" / "piped.txt").exists()


@contextlib.contextmanager
def signed_in(port: int) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=PATIENCE) as browser:
        assert sign_in(browser, port).status_code == 303
        yield browser


def page_csrf(browser: httpx.Client) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', browser.get("/ui").text)
    assert found is not None
    return found.group(1)


MEMORY_EVENT = b'"kind":"memory"'


def follow_until(chunks: Iterator[bytes], wanted: bytes) -> bytes:
    """What the stream sends until `wanted` is in it, it ends, or PATIENCE runs out."""
    deadline = time.monotonic() + PATIENCE
    got = b""
    for chunk in chunks:
        got += chunk
        if wanted in got or time.monotonic() > deadline:
            break
    return got


def last_seq(daemon: Daemon) -> int:
    listed = daemon.cli("events", "--json")
    assert listed.returncode == 0, listed.stderr
    return max((json.loads(line)["seq"] for line in listed.stdout.splitlines()), default=0)


def seqs(stream: bytes) -> list[int]:
    return [int(s) for s in re.findall(rb'^data: \{"seq":(\d+),', stream, re.M)]


def test_the_event_stream_ends_with_its_sign_in(gateway: Gateway) -> None:
    """A dashboard's live events are the operator's: once that browser signs out (or its
    session expires, or is pushed out by newer ones), an event stream it opened before must
    show nothing more, rather than follow the daemon for as long as it stays connected."""
    daemon, port = gateway
    with signed_in(port) as browser, browser.stream("GET", "/ui/events") as events:
        assert events.status_code == 200
        chunks = events.iter_raw()
        got = next(chunks)  # the backlog: the stream is open
        signout = browser.post(
            "/ui/signout",
            data={"csrf": page_csrf(browser)},
            headers={"origin": f"http://127.0.0.1:{port}"},
        )
        assert signout.status_code == 303
        signed_out_at = last_seq(daemon)
        stored = daemon.cli("memory", "store", "-a", "alpha", "after-signout", "x")
        assert stored.returncode == 0, stored.stderr
        assert last_seq(daemon) > signed_out_at
        got += follow_until(chunks, MEMORY_EVENT + b',"agent":"alpha","op":"store"')
    later = [seq for seq in seqs(got) if seq > signed_out_at]
    assert not later, "a signed-out browser still follows the events"


def test_the_event_stream_outlives_a_quiet_spell(gateway: Gateway) -> None:
    """A keepalive is written after 15 quiet seconds; the stream goes on after it and shows
    the next event (it used to end there with an error: the keepalive's deadline cancelled
    the subscription's iterator, which then had nothing more to give)."""
    daemon, port = gateway
    with signed_in(port) as browser, browser.stream("GET", "/ui/events") as events:
        chunks = events.iter_raw()
        assert b": keepalive" in follow_until(chunks, b": keepalive")
        stored = daemon.cli("memory", "store", "-a", "alpha", "after-a-keepalive", "x")
        assert stored.returncode == 0, stored.stderr
        assert MEMORY_EVENT in follow_until(chunks, MEMORY_EVENT)
    assert "Error in ASGI" not in daemon.log_path.read_text()


@pytest.mark.parametrize("host", ["rebound.example", "rebound.example:{port}", "127.0.0.1.nip.io"])
def test_the_dashboard_answers_no_other_host_name(gateway: Gateway, host: str) -> None:
    """DNS rebinding: another site's page whose name now resolves to 127.0.0.1 is, to the
    browser, the same origin as the dashboard it reaches (Host and Origin both name that
    site), so it could read the sign-in form, post it and spend the sign-in attempts of the
    whole listener, locking the operator out. Over plain HTTP (loopback only) the dashboard
    answers only a loopback Host."""
    _, port = gateway
    name = host.format(port=port)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"host": name}) as page:
        form = page.get("/ui/signin")
        assert form.status_code == 421, form.status_code
        assert "zc_signin" not in page.cookies
        for _ in range(12):  # more than the sign-in attempts of a minute
            tried = page.post(
                "/ui/signin",
                data={"csrf": "x", "token": "guess"},
                headers={"origin": f"http://{name}", "cookie": "zc_signin=x"},
            )
            assert tried.status_code == 421
    # The operator still signs in, by any loopback name.
    for own in (f"127.0.0.1:{port}", f"localhost:{port}"):
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"host": own}) as ok:
            form = ok.get("/ui/signin")
            assert form.status_code == 200
    with signed_in(port) as browser:
        assert browser.get("/ui").status_code == 200


@pytest.mark.parametrize(
    ("copied", "named"),
    [
        ("ZC_OPERATOR", "gateway.operator_token_env"),  # an API key signing in as operator
        ("ZC_API_OTHER", "gateway.tokens.other.token_env"),  # a key answering as another
    ],
)
def test_a_daemon_whose_tokens_share_a_value_refuses_to_start(copied: str, named: str) -> None:
    """Two variables, one value (a token pasted twice): the API key `ci` would then sign in
    to the dashboard, or be taken for another key, its sessions and reach. The daemon
    refuses to start, naming both variables and no value."""
    root = short_root()
    try:
        daemon = Daemon(root, gateway_config(root, free_port()), faults=False)
        env = daemon.env(**{**ENV, copied: API_TOKEN})
        started = subprocess.run(
            [*daemon.cli_argv(), "daemon"], env=env, capture_output=True, text=True, timeout=60
        )
        assert started.returncode == 2, (started.stdout, started.stderr)
        assert named in started.stderr and "ZC_API_CI" in started.stderr, started.stderr
        assert API_TOKEN not in started.stderr + started.stdout
    finally:
        remove_root(root)
