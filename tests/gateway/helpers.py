"""A real daemon with a gateway, for the API tests (the official OpenAI SDK as the client)
and the dashboard tests (Playwright driving Debian's chromium).

Tokens: `ci` (sender `ci-bot`, reaches alpha; its peer group grants file_write, the memory
tools), `twin` (sender `ci-bot` too, reaches alpha, no tool), `other` (sender `other-bot`,
reaches beta, no tool), `tight` (reaches alpha, 3 requests a minute). The operator's
token is its own variable."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai

from tests.conftest import PATIENCE
from tests.known_secrets import API_TOKEN, OPERATOR_TOKEN, OTHER_API_TOKEN
from tests.supervisor import harness

TIGHT_TOKEN = "zc-test-gateway-tight-token-0b5e"  # not a secret the logs are checked for
TWIN_TOKEN = "zc-test-gateway-twin-token-77aa"
ENV = {
    "ZC_API_TWIN": TWIN_TOKEN,
    "ZC_API_CI": API_TOKEN,
    "ZC_API_OTHER": OTHER_API_TOKEN,
    "ZC_API_TIGHT": TIGHT_TOKEN,
    "ZC_OPERATOR": OPERATOR_TOKEN,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def gateway_config(root: Path, port: int, **gateway: Any) -> dict[str, Any]:
    doc = harness.make_config(
        root,
        {
            "alpha": harness.agent_entry(workspace={"path": str(root / "ws-alpha")}),
            "beta": harness.agent_entry(workspace={"path": str(root / "ws-beta")}),
        },
        groups={
            "api-ci": {
                "channel": "api.ci",
                "agents": ["alpha"],
                "external_peers": ["ci-bot"],
                "tools": ["file_write", "memory_store", "memory_recall"],
            },
            "api-other": {"channel": "api.other", "agents": ["beta"], "external_peers": ["*"]},
            "api-tight": {"channel": "api.tight", "agents": ["alpha"], "external_peers": ["*"]},
            "api-twin": {"channel": "api.twin", "agents": ["alpha"], "external_peers": ["ci-bot"]},
        },
    )
    doc["gateway"] = {
        "listen": f"127.0.0.1:{port}",
        "operator_token_env": "ZC_OPERATOR",
        "tokens": {
            "ci": {"token_env": "ZC_API_CI", "sender": "ci-bot", "agents": ["alpha"]},
            "other": {"token_env": "ZC_API_OTHER", "sender": "other-bot", "agents": ["beta"]},
            # The same sender as `ci`, another token: a namespace of its own all the same.
            "twin": {"token_env": "ZC_API_TWIN", "sender": "ci-bot", "agents": ["alpha"]},
            "tight": {
                "token_env": "ZC_API_TIGHT",
                "agents": ["alpha"],
                "rate_limit_per_minute": 3,
            },
        },
        **gateway,
    }
    return doc


def wait_serving(daemon: harness.Daemon) -> None:
    daemon.wait_for(
        lambda s: any(
            "gateway" in c["keys"] and c["state"] == "serving" for c in s.get("channels", [])
        )
    )


@contextlib.contextmanager
def gateway_daemon(
    edit: Callable[[dict[str, Any]], None] | None = None, **gateway: Any
) -> Iterator[tuple[harness.Daemon, int]]:
    """A daemon with the gateway serving; `edit` changes its config document first."""
    root = harness.short_root()
    port = free_port()
    doc = gateway_config(root, port, **gateway)
    if edit is not None:
        edit(doc)
    daemon = harness.Daemon(root, doc, faults=False)
    try:
        daemon.start(**ENV)
        wait_serving(daemon)
        yield daemon, port
    finally:
        daemon.stop()
        try:
            from tests.known_secrets import assert_no_secret_logged

            assert_no_secret_logged(daemon.log_path)
        finally:
            harness.remove_root(root)


def client(port: int, token: str = API_TOKEN, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(
        api_key=token, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, **options
    )


def async_client(port: int, token: str = API_TOKEN, **options: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key=token, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, **options
    )


def approvals(daemon: harness.Daemon) -> list[dict[str, Any]]:
    result = daemon.cli("approvals", "list", "--json")
    assert result.returncode == 0, result.stderr
    listed: list[dict[str, Any]] = json.loads(result.stdout)["approvals"]
    return listed


def wait_until(check: Callable[[], Any], what: str, timeout: float = PATIENCE) -> Any:
    """Poll `check` (a CLI call each time) until it returns something true."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout} s: {what}")
        time.sleep(0.1)


def sign_in(browser: httpx.Client, port: int, token: str = OPERATOR_TOKEN) -> httpx.Response:
    """The dashboard's sign-in form, filled as the page would (its CSRF field, our origin)."""
    form_page = browser.get("/ui/signin")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form_page.text)
    assert csrf is not None
    return browser.post(
        "/ui/signin",
        data={"csrf": csrf.group(1), "token": token},
        headers={"origin": f"http://127.0.0.1:{port}", "sec-fetch-site": "same-origin"},
    )
