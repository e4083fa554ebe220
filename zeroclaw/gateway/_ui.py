"""The operator dashboard's decisions, without I/O (issue 29): routes, sign-in sessions,
cookies, CSRF checks and the security headers of every page. `_pages` renders the HTML,
`_server` wires both to hypercorn.

- Sign-in: the operator's token (its own variable, never an API token's) compared in
  constant time, a bounded rate of attempts for the whole listener, then a random session
  id in an `HttpOnly; SameSite=Strict` cookie scoped to `/ui` (`Secure` under TLS).
  Sessions live in the daemon's memory: a restart signs everyone out.
- Every POST needs its session's CSRF token in the form (the sign-in form a token of its
  own, in a short-lived cookie: double submit), and is refused when the browser says it
  comes from another site (`Sec-Fetch-Site`) or another origin (`Origin`).
- Every answer carries a Content-Security-Policy with no inline script or style at all
  (`script-src 'self'`: the page's one script is a file of ours), and no third origin.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import parse_qs

SESSION_COOKIE = "zc_session"
SIGNIN_COOKIE = "zc_signin"  # the sign-in form's CSRF token (double submit)
SESSION_TTL_SECS = 12 * 3600.0
MAX_SESSIONS = 64  # signed-in browsers at once; the oldest is signed out beyond
SIGNIN_PER_MINUTE = 10  # sign-in attempts for the whole listener
MAX_FORM_BYTES = 8192

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make a POST say Origin: null
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


# --------------------------------------------------------------------------- routes


UiRouteName = Literal[
    "overview",
    "memory",
    "approvals_fragment",
    "events_stream",
    "signin_form",
    "signin",
    "signout",
    "approve",
    "deny",
    "static",
    "not_found",
    "method_not_allowed",
]


@dataclass(frozen=True)
class UiRoute:
    name: UiRouteName
    arg: str = ""

    @property
    def is_post(self) -> bool:
        return self.name in ("signin", "signout", "approve", "deny")

    @property
    def needs_session(self) -> bool:
        return self.name not in (
            "signin_form",
            "signin",
            "static",
            "not_found",
            "method_not_allowed",
        )


STATIC_FILES = ("app.js", "app.css")


def parse_ui_route(method: str, path: str) -> UiRoute:
    get: dict[str, UiRouteName] = {
        "/ui": "overview",
        "/ui/": "overview",
        "/ui/memory": "memory",
        "/ui/fragments/approvals": "approvals_fragment",
        "/ui/events": "events_stream",
        "/ui/signin": "signin_form",
    }
    post: dict[str, UiRouteName] = {"/ui/signin": "signin", "/ui/signout": "signout"}
    route: UiRoute | None = None
    allowed = "GET"
    if path in get and method == "GET":
        return UiRoute(get[path])
    if path in post:
        route, allowed = UiRoute(post[path]), "POST"
    elif path in get:
        return UiRoute("method_not_allowed", "GET")
    parts = path.split("/")
    if len(parts) == 5 and parts[:3] == ["", "ui", "approvals"] and parts[4] in ("approve", "deny"):
        name: UiRouteName = "approve" if parts[4] == "approve" else "deny"
        route, allowed = UiRoute(name, parts[3]), "POST"
    if len(parts) == 4 and parts[:3] == ["", "ui", "static"] and parts[3] in STATIC_FILES:
        route, allowed = UiRoute("static", parts[3]), "GET"
    if route is None:
        return UiRoute("not_found")
    if method != allowed:
        return UiRoute("method_not_allowed", allowed)
    return route


# --------------------------------------------------------------------------- sessions


@dataclass(frozen=True)
class UiSession:
    id: str
    csrf: str
    expires: float


@dataclass
class Sessions:
    """Signed-in browsers, bounded: the oldest is signed out when one more signs in."""

    ttl: float = SESSION_TTL_SECS
    capacity: int = MAX_SESSIONS
    _open: OrderedDict[str, UiSession] = field(default_factory=OrderedDict)

    def open(self, now: float) -> UiSession:
        session = UiSession(secrets.token_urlsafe(32), secrets.token_urlsafe(32), now + self.ttl)
        self._open[session.id] = session
        while len(self._open) > self.capacity:
            self._open.popitem(last=False)
        return session

    def get(self, session_id: str | None, now: float) -> UiSession | None:
        if not session_id:
            return None
        session = self._open.get(session_id)
        if session is None:
            return None
        if session.expires <= now:
            del self._open[session_id]
            return None
        return session

    def close(self, session_id: str | None) -> None:
        if session_id:
            self._open.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._open)


def token_matches(given: str | None, token: bytes) -> bool:
    """Whether the operator typed the operator's token (constant time; none admits no one)."""
    if not token or not given:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), token)


# --------------------------------------------------------------------------- requests


def header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def cookies(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The request's cookies (the first of a name wins: a sub-path cannot shadow ours)."""
    found: dict[str, str] = {}
    for key, value in headers:
        if key.lower() != b"cookie":
            continue
        for pair in value.decode("latin-1").split(";"):
            name, sep, text = pair.strip().partition("=")
            if sep and name and name not in found:
                found[name] = text.strip().strip('"')
    return found


def form(body: bytes) -> dict[str, str]:
    """An urlencoded form's fields (the first value of each)."""
    try:
        text = body.decode("ascii")
    except UnicodeDecodeError:
        return {}
    return {k: v[0] for k, v in parse_qs(text, max_num_fields=16).items() if v}


CrossSite = Literal["cross_site", "cross_origin", "no_csrf_token", "bad_csrf_token"]


def csrf_refusal(
    headers: Iterable[tuple[bytes, bytes]],
    origin: str,
    expected: str | None,
    fields: Mapping[str, str],
) -> CrossSite | None:
    """Why a POST is not the dashboard's own (None: it is). `origin`: ours, as the browser
    names it (`http://127.0.0.1:8788`); `expected`: the CSRF token the form must carry."""
    listed = list(headers)
    site = header(listed, b"sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return "cross_site"
    sent_origin = header(listed, b"origin")
    if sent_origin is not None and sent_origin != origin:
        return "cross_origin"
    given = fields.get("csrf")
    if not expected or not given:
        return "no_csrf_token"
    if not hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode()):
        return "bad_csrf_token"
    return None


def foreign_host(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a plain-HTTP request names a host the loopback listener is not (DNS
    rebinding): another site whose name now resolves to 127.0.0.1 is, to the browser, the
    origin its page came from, so it may read our pages and post their forms, Origin and
    Host agreeing. An IP literal cannot be rebound, and browsers resolve `localhost`
    themselves; any other name is refused. (Under TLS the certificate names the host.)"""
    host = header(headers, b"host")
    if not host:
        return True
    name = host.rpartition("]")[0][1:] if host.startswith("[") else host.partition(":")[0]
    if name.lower() == "localhost":
        return False
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return True
    return False


def own_origin(headers: Iterable[tuple[bytes, bytes]], scheme: str) -> str:
    """Our origin as the browser sees it: the scheme and the Host it sent."""
    return f"{scheme}://{header(headers, b'host') or ''}"


# --------------------------------------------------------------------------- answers


def cookie(name: str, value: str, *, max_age: int, secure: bool, path: str = "/ui") -> bytes:
    """A `Set-Cookie` value: never readable by script, never sent cross-site."""
    parts = [f"{name}={value}", f"Path={path}", f"Max-Age={max_age}", "HttpOnly", "SameSite=Strict"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts).encode()


def page_headers(
    content_type: bytes, extra: Iterable[tuple[bytes, bytes]] = ()
) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", content_type), *SECURITY_HEADERS, *extra]


def redirect(
    location: str, extra: Iterable[tuple[bytes, bytes]] = ()
) -> tuple[int, list[tuple[bytes, bytes]]]:
    """303 See Other to a path of ours (after a POST, the browser GETs it)."""
    assert location.startswith("/ui")
    return 303, page_headers(
        b"text/plain; charset=utf-8", [(b"location", location.encode()), *extra]
    )
