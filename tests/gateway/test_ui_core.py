"""The dashboard's pure parts: routes, sessions, cookies, CSRF, the security headers, and
the escaping builder and pages (whatever outside text holds, it stays text)."""

from __future__ import annotations

import ipaddress
import re
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.control import AgentStatus, ApprovalInfo, NextFire
from zeroclaw.gateway._html import Markup, escape, join, tag
from zeroclaw.gateway._pages import Overview, approvals_fragment, overview_page, signin_page
from zeroclaw.gateway._ui import (
    CSP,
    SECURITY_HEADERS,
    Sessions,
    UiRoute,
    cookie,
    cookies,
    csrf_refusal,
    foreign_host,
    form,
    parse_ui_route,
    token_matches,
)

ORIGIN = "http://127.0.0.1:8788"
HOSTILE = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>&"


def test_routes() -> None:
    assert parse_ui_route("GET", "/ui") == UiRoute("overview")
    assert parse_ui_route("POST", "/ui/approvals/ap-1/approve") == UiRoute("approve", "ap-1")
    assert parse_ui_route("GET", "/ui/approvals/ap-1/approve").name == "method_not_allowed"
    assert parse_ui_route("GET", "/ui/static/app.js") == UiRoute("static", "app.js")
    assert parse_ui_route("GET", "/ui/static/../../etc/passwd").name == "not_found"
    assert parse_ui_route("GET", "/ui/static/other.js").name == "not_found"
    assert parse_ui_route("POST", "/ui").name == "method_not_allowed"
    assert not UiRoute("signin").needs_session and UiRoute("approve").needs_session


def test_sessions_expire_and_are_bounded() -> None:
    sessions = Sessions(ttl=10.0, capacity=2)
    first = sessions.open(0.0)
    assert sessions.get(first.id, 5.0) == first
    assert sessions.get(first.id, 10.0) is None  # expired
    a, b, c = sessions.open(20.0), sessions.open(20.0), sessions.open(20.0)
    assert sessions.get(a.id, 21.0) is None  # the oldest signed out
    assert sessions.get(b.id, 21.0) == b and sessions.get(c.id, 21.0) == c
    sessions.close(b.id)
    assert sessions.get(b.id, 21.0) is None
    assert sessions.get("made-up", 21.0) is None and sessions.get(None, 21.0) is None
    assert len({a.id, b.id, c.id, a.csrf, b.csrf}) == 5


def test_the_operator_token() -> None:
    assert token_matches("op", b"op")
    assert not token_matches("o", b"op") and not token_matches("", b"op")
    assert not token_matches("anything", b"")  # no operator token: no one signs in


def test_cookies_are_httponly_and_strict() -> None:
    value = cookie("zc_session", "abc", max_age=60, secure=True).decode()
    assert "HttpOnly" in value and "SameSite=Strict" in value and "Secure" in value
    assert "Path=/ui" in value
    assert "Secure" not in cookie("zc_session", "abc", max_age=60, secure=False).decode()
    jar = cookies([(b"cookie", b"zc_session=one; other=x; zc_session=two")])
    assert jar["zc_session"] == "one"


def test_csrf() -> None:
    good = {"csrf": "tok"}
    assert csrf_refusal([(b"origin", ORIGIN.encode())], ORIGIN, "tok", good) is None
    assert csrf_refusal([], ORIGIN, "tok", good) is None
    assert csrf_refusal([(b"sec-fetch-site", b"cross-site")], ORIGIN, "tok", good) == "cross_site"
    assert csrf_refusal([(b"sec-fetch-site", b"same-site")], ORIGIN, "tok", good) == "cross_site"
    evil = [(b"origin", b"http://evil.example")]
    assert csrf_refusal(evil, ORIGIN, "tok", good) == "cross_origin"
    assert csrf_refusal([], ORIGIN, "tok", {}) == "no_csrf_token"
    assert csrf_refusal([], ORIGIN, None, good) == "no_csrf_token"
    assert csrf_refusal([], ORIGIN, "tok", {"csrf": "other"}) == "bad_csrf_token"
    assert form(b"csrf=a%20b&token=x&token=y") == {"csrf": "a b", "token": "x"}
    assert form(b"\xff") == {}


def test_the_policy_allows_no_inline_script_and_no_other_origin() -> None:
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
    assert "default-src 'none'" in CSP and "frame-ancestors 'none'" in CSP
    names = {name for name, _ in SECURITY_HEADERS}
    assert {b"content-security-policy", b"x-content-type-options", b"x-frame-options"} <= names


@given(st.text())
def test_text_is_always_escaped(text: str) -> None:
    html = tag("td", {"title": text}, text)
    body = html[html.index(">") + 1 : -len("</td>")]
    assert "<" not in body and ">" not in body
    assert html.count('"') == 2  # the attribute's own quotes only
    assert escape(Markup("<b>")) == "<b>"  # our own markup stays markup
    assert join(text, None, [text]) == escape(text) + escape(text)


def agent(alias: str, error: str | None = None) -> AgentStatus:
    return AgentStatus(
        alias, "running", 42, 1, None, error, None, None, "always", 0, None, "landlock"
    )


def test_pages_keep_outside_text_as_text() -> None:
    page = overview_page(
        Overview(
            agents=[agent("alpha", HOSTILE)],
            approvals=[ApprovalInfo("ap-1", "alpha", "api.ci", HOSTILE, HOSTILE, 30.0)],
            invocations=[],
            usage=[],
            rss={42: 3 * 1024 * 1024},
        ),
        "csrf-token",
    ).decode()
    assert "<script>alert" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    scripts = re.findall(r"<script[^>]*>", page)
    assert scripts == ['<script src="/ui/static/app.js" defer>']  # ours, no inline one
    assert "style=" not in page and "onclick" not in page
    assert page.count('name="csrf" value="csrf-token"') == 3  # sign out, approve, deny
    assert "3.0 MiB" in page
    fragment = approvals_fragment([], "t")
    assert "No approval is waiting." in fragment
    assert '<input type="password" name="token"' in signin_page("c", HOSTILE).decode()


def test_an_agent_waiting_to_restart_shows_when_it_starts_next() -> None:
    waiting = AgentStatus(
        "alpha", "backoff", None, 2, "exit 1", "boom", None, None, "always", 0, 2.6, "landlock"
    )
    page = overview_page(Overview([waiting, agent("beta")], [], [], []), "t").decode()
    assert '<td class="next-start">in 3 s</td>' in page
    assert '<td class="next-start"></td>' in page  # beta runs: nothing scheduled


def test_an_agents_schedule_due_first_is_its_next_run() -> None:
    due = NextFire("alpha", "<b>digest</b>", 1_800_000_000.0)
    data = Overview([agent("alpha"), agent("beta")], [], [], [], now=1.0, next_runs=[due])
    page = overview_page(data, "t").decode()
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_800_000_000.0))
    assert f'<td class="next-run">&lt;b&gt;digest&lt;/b&gt; at {at}</td>' in page
    assert page.count('<td class="next-run"></td>') == 1  # beta: nothing scheduled


@pytest.mark.parametrize(
    ("host", "foreign"),
    [
        ("127.0.0.1:8788", False),
        ("127.0.0.1", False),
        ("localhost:8788", False),
        ("LocalHost", False),
        ("[::1]:8788", False),
        ("10.0.0.7:8788", False),  # an address literal: no name to rebind
        (None, True),
        ("", True),
        ("rebound.example:8788", True),
        ("127.0.0.1.nip.io", True),
        ("localhost.rebound.example", True),
        ("[::1", True),
    ],
)
def test_only_a_loopback_host_name_or_an_address_is_the_dashboards(
    host: str | None, foreign: bool
) -> None:
    headers = [] if host is None else [(b"host", host.encode())]
    assert foreign_host(headers) is foreign


@given(st.from_regex(r"[a-zA-Z0-9.-]{1,30}", fullmatch=True))
def test_a_host_name_is_foreign_unless_it_is_localhost_or_an_address(name: str) -> None:
    try:
        ipaddress.ip_address(name)
        address = True
    except ValueError:
        address = False
    own = address or name.lower() == "localhost"
    assert foreign_host([(b"host", f"{name}:8788".encode())]) is not own
