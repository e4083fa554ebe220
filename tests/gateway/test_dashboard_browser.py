"""The operator dashboard in a real browser: Debian's chromium driven by Playwright, against
a real daemon. Sign in, an agent's restart appearing live, a waiting write approved from
the page and its turn finishing, and an event carrying `<script>` running nothing.

Skipped, saying so, where chromium is not installed (`make browser` installs it; `.ci/run`
does)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PATIENCE
from tests.gateway.helpers import approvals, client, gateway_daemon, wait_until
from tests.known_secrets import OPERATOR_TOKEN
from tests.supervisor.harness import Daemon

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = PATIENCE * 1000

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"Debian's chromium is not installed at {CHROMIUM} (`make browser` installs it)",
)

if CHROMIUM.exists():
    from playwright.sync_api import Browser, Page, expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Daemon, int]]:
    with gateway_daemon() as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Playwright's sync API runs a plain asyncio loop of its own; trio_asyncio (the serial
    # channel's bridge, imported by other tests in this process) installs a policy whose
    # loops cannot be run so.
    policy = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
            try:
                yield launched
            finally:
                launched.close()
    finally:
        asyncio.set_event_loop_policy(policy)


@pytest.fixture
def page(browser: Browser, gateway: tuple[Daemon, int]) -> Iterator[Page]:
    """A fresh browser context (no cookie), signed in to the dashboard."""
    _, port = gateway
    context = browser.new_context(base_url=f"http://127.0.0.1:{port}")
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    dialogs: list[str] = []
    opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_in(opened)
    yield opened
    assert not dialogs, f"a script ran: {dialogs}"
    context.close()


def sign_in(page: Page, token: str = OPERATOR_TOKEN) -> None:
    page.goto("/ui")
    assert page.url.endswith("/ui/signin")  # redirected: not signed in
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")


def test_sign_in_sets_a_strict_httponly_cookie(
    browser: Browser, gateway: tuple[Daemon, int]
) -> None:
    _, port = gateway
    context = browser.new_context(base_url=f"http://127.0.0.1:{port}")
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    sign_in(page, "not the token")
    expect(page.get_by_role("alert")).to_contain_text("not the operator token")
    sign_in(page)
    expect(page.locator("#agent-table tr[data-agent=alpha]")).to_be_visible()
    session = next(c for c in context.cookies() if c["name"] == "zc_session")
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # no script reads it
    answer = page.request.get("/ui")
    assert "script-src 'self'" in answer.headers["content-security-policy"]
    page.click("text=Sign out")
    expect(page.locator("input[name=token]")).to_be_visible()
    context.close()


def test_an_agent_restart_appears_live(page: Page, gateway: tuple[Daemon, int]) -> None:
    daemon, _ = gateway
    expect(page.locator("#events-state")).to_have_text("live")
    restarted = daemon.cli("agents", "restart", "beta")
    assert restarted.returncode == 0, restarted.stderr
    transitions = page.locator("#event-list li[data-kind='agent.transition']", has_text="beta")
    expect(transitions.first).to_be_visible()
    expect(page.locator("tr[data-agent=beta] td.state")).to_have_text("running")


def test_approving_a_waiting_write_finishes_its_turn(
    page: Page, gateway: tuple[Daemon, int]
) -> None:
    daemon, port = gateway
    expect(page.locator("#events-state")).to_have_text("live")
    answers = run_in_background(port, "write approved.txt: written after the click")
    row = page.locator("#approval-table tr", has_text="approved.txt")
    expect(row).to_be_visible()  # appeared live, no reload
    row.locator("button.approve").click()
    wait_until(lambda: answers, "the completion came back")
    assert (daemon.root / "ws-alpha" / "approved.txt").read_text() == "written after the click"
    page.goto("/ui")
    finished = page.locator("#event-list li[data-kind='turn.finished']", has_text="api.ci")
    expect(finished.first).to_be_visible()


def test_a_script_in_an_event_runs_nothing(page: Page, gateway: tuple[Daemon, int]) -> None:
    daemon, port = gateway
    expect(page.locator("#events-state")).to_have_text("live")
    # The path is the sender's text, and the approval shows it: in the live event, in the
    # queue fetched live, and in the page as rendered by the server.
    hostile = "<script>window.pwned=1</script><img/src/onerror=window.pwned=2>"
    run_in_background(port, f"write {hostile}: x")
    event = page.locator("#event-list li[data-kind='approval.requested']", has_text="pwned")
    expect(event.first).to_contain_text("<script>window.pwned=1</script>")
    row = page.locator("#approval-table tr", has_text="pwned")
    expect(row).to_contain_text(hostile)
    page.reload()
    expect(page.locator("#approval-table tr", has_text="pwned")).to_contain_text(hostile)
    assert page.evaluate("window.pwned") is None
    assert page.locator("main script, main img").count() == 0
    page.locator("#approval-table tr", has_text="pwned").locator("button.deny").click()
    wait_until(lambda: not approvals(daemon), "the denied approval leaves the queue")
    assert page.evaluate("window.pwned") is None


def run_in_background(port: int, text: str) -> list[Any]:
    """An API turn in a thread (its approval waits); the list gets its answer."""
    answers: list[Any] = []

    def turn() -> None:
        answers.append(
            client(port, timeout=PATIENCE).chat.completions.create(
                model="alpha", messages=[{"role": "user", "content": text}]
            )
        )

    threading.Thread(target=turn, daemon=True).start()
    return answers
