"""A second attack pass on the gateway, through a real daemon, with what a loopback client,
a key holder or another site's page can do: a request pipelined behind another and then
abandoned, a dashboard event stream that outlives its sign-in, and a page that reaches the
loopback listener under another host name (DNS rebinding)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from tests.conftest import PATIENCE
from tests.gateway.helpers import approvals, gateway_daemon, wait_until
from tests.known_secrets import API_TOKEN
from tests.supervisor.harness import Daemon

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
