"""The attack pass on the gateway, through a real daemon, using only what it offers: the API
with the official SDK (token confusion, a key reaching what it does not list, sessions
that are not its own, tools its group does not grant) and the dashboard with a plain HTTP
client playing another site (cross-site and cross-origin POSTs, no CSRF token, no
session), and clients too slow to finish a request."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import PATIENCE
from tests.gateway.helpers import (
    TWIN_TOKEN,
    approvals,
    client,
    gateway_daemon,
    sign_in,
    wait_until,
)
from tests.known_secrets import API_TOKEN, OPERATOR_TOKEN, OTHER_API_TOKEN
from tests.supervisor.harness import Daemon

Gateway = tuple[Daemon, int]


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    def short_limits(doc: dict[str, Any]) -> None:
        doc["gateway"]["limits"] = {"header_timeout_secs": 1.0, "body_timeout_secs": 1.0}

    with gateway_daemon(short_limits) as running:
        yield running


def say(port: int, token: str, text: str, user: str, model: str = "alpha") -> str:
    answer = client(port, token).chat.completions.create(
        model=model, messages=[{"role": "user", "content": text}], user=user
    )
    return answer.choices[0].message.content or ""


def test_a_refusal_with_the_body_unread_closes_the_connection(gateway: Gateway) -> None:
    """A completion refused before its body is read (a wrong token) leaves the body on
    the connection, which the server then closes: said in the answer, so the client does
    not send its next request on it and find it closed (attack pass, issue 30)."""
    _, port = gateway
    body = b'{"model": "alpha", "messages": [{"role": "user", "content": "%s"}]}' % (b"x" * 200_000)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
        for _ in range(5):
            refused = http.post(
                "/v1/chat/completions", content=body, headers={"authorization": "Bearer x"}
            )
            assert refused.status_code == 401
            assert refused.headers["connection"] == "close"
            listed = http.get("/v1/models", headers={"authorization": f"Bearer {API_TOKEN}"})
            assert listed.status_code == 200
            assert "connection" not in listed.headers  # no body: kept alive


# --------------------------------------------------------------------------- token confusion


def test_tokens_are_not_interchangeable(gateway: Gateway) -> None:
    _, port = gateway
    for wrong in (OPERATOR_TOKEN, API_TOKEN[:-1], API_TOKEN + "x", API_TOKEN.upper(), ""):
        with pytest.raises(openai.AuthenticationError):
            client(port, wrong or "x").models.list()
    # An API token does not sign in to the dashboard.
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as browser:
        assert sign_in(browser, port, API_TOKEN).status_code == 401
        assert "zc_session" not in browser.cookies


def test_two_keys_of_one_sender_keep_their_own_sessions(gateway: Gateway) -> None:
    _, port = gateway
    say(port, API_TOKEN, "the ci key's secret is cobalt", "shared")
    assert "cobalt" in say(port, API_TOKEN, "history", "shared")
    assert "cobalt" not in say(port, TWIN_TOKEN, "history", "shared")


@pytest.mark.parametrize("user", ["default", "peer:beta/default", "../default", "api.ci:ci-bot/x"])
def test_a_user_field_never_names_another_origins_session(gateway: Gateway, user: str) -> None:
    daemon, port = gateway
    said = daemon.cli("-a", "alpha", "chat", "-m", "the operator's note is vermilion")
    assert said.returncode == 0, said.stderr
    assert "vermilion" not in say(port, TWIN_TOKEN, "history", user)


# --------------------------------------------------------------------------- reach and grants


def test_a_key_reaches_only_the_agents_it_lists(gateway: Gateway) -> None:
    _, port = gateway
    for model in ("beta", "daemon", "../alpha", "alpha "):
        with pytest.raises(openai.NotFoundError):
            say(port, API_TOKEN, "hi", "u", model=model)
    assert "I am beta" in say(port, OTHER_API_TOKEN, "hi there", "u", model="beta")


def test_a_key_gets_only_the_tools_its_group_lists(gateway: Gateway) -> None:
    daemon, port = gateway
    # `twin` is admitted with no tool: a write is refused by the agent's engine, nothing
    # is asked of the operator, nothing written.
    answer = say(port, TWIN_TOKEN, "write twin.txt: no grant", "u")
    assert "tool_not_granted" in answer or "not granted" in answer, answer
    assert not approvals(daemon)
    assert not (daemon.root / "ws-alpha" / "twin.txt").exists()


# --------------------------------------------------------------------------- cross-site


def test_cross_site_requests_change_nothing(gateway: Gateway) -> None:
    daemon, port = gateway
    answers: list[Any] = []
    thread = threading.Thread(
        target=lambda: answers.append(
            client(port, timeout=PATIENCE).chat.completions.create(
                model="alpha", messages=[{"role": "user", "content": "write csrf.txt: x"}]
            )
        ),
        daemon=True,
    )
    thread.start()
    waiting = wait_until(lambda: approvals(daemon), "the write waits for the operator")
    approval_id = waiting[0]["id"]
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as browser:
        assert sign_in(browser, port).status_code == 303
        page = browser.get("/ui")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None
        approve = f"/ui/approvals/{approval_id}/approve"
        attempts = [
            # another site's page posting with the operator's cookie (were it sent)
            ({"origin": "http://evil.example"}, {"csrf": csrf.group(1)}),
            ({"sec-fetch-site": "cross-site"}, {"csrf": csrf.group(1)}),
            ({"sec-fetch-site": "same-site"}, {"csrf": csrf.group(1)}),
            ({"origin": "null"}, {"csrf": csrf.group(1)}),
            ({}, {}),  # no token
            ({}, {"csrf": "guessed"}),
        ]
        for headers, data in attempts:
            refused = browser.post(approve, headers=headers, data=data)
            assert refused.status_code == 403, (headers, data)
        assert approvals(daemon), "a cross-site request approved the write"
        # The page's own form does.
        done = browser.post(
            approve,
            headers={"origin": f"http://127.0.0.1:{port}"},
            data={"csrf": csrf.group(1)},
        )
        assert done.status_code == 303
    thread.join(PATIENCE)
    assert answers and (daemon.root / "ws-alpha" / "csrf.txt").exists()


def test_without_a_session_the_dashboard_gives_nothing(gateway: Gateway) -> None:
    _, port = gateway
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as stranger:
        assert stranger.get("/ui").status_code == 303
        assert stranger.get("/ui/events").status_code == 401
        assert stranger.get("/ui/fragments/approvals").status_code == 401
        assert stranger.get("/ui/memory?agent=alpha").status_code == 303
        made_up = stranger.get("/ui", headers={"cookie": "zc_session=" + "x" * 43})
        assert made_up.status_code == 303
        # No CORS: another site's script can never read an answer of the API.
        listed = stranger.get("/v1/models", headers={"origin": "http://evil.example"})
        assert "access-control-allow-origin" not in listed.headers
        preflight = stranger.options(
            "/v1/chat/completions", headers={"origin": "http://evil.example"}
        )
        assert "access-control-allow-origin" not in preflight.headers


# --------------------------------------------------------------------------- slow clients


def raw(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)
    sock.settimeout(PATIENCE)
    return sock


def closed_by_server(sock: socket.socket) -> bytes:
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    return got


def test_slow_clients_are_cut(gateway: Gateway) -> None:
    _, port = gateway
    with raw(port) as slow_head:
        slow_head.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nauthorization: Bearer ")
        assert closed_by_server(slow_head) == b""  # cut at the header deadline
    with raw(port) as slow_body:
        slow_body.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
            b"authorization: Bearer " + API_TOKEN.encode() + b"\r\n"
            b"content-length: 100\r\n\r\n{"
        )
        assert closed_by_server(slow_body).startswith(b"HTTP/1.1 408")
    # The gateway still answers everyone else.
    assert client(port).models.list().data
