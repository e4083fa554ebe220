"""HTTP adapters (ADR 0054), the pure half: where a call may go, what is sent, and how the
reply reads. The daemon's runner (`zeroclaw.supervisor._http_adapter`) makes the request.

The wire, one request per call:

    POST <endpoint>
    Content-Type: application/json
    Accept-Encoding: identity
    Authorization: Bearer <the value of api_key_env>      (only when the manifest names one)

    {"capability": "<capability>", "input": "<the agent's input>"}

A 2xx reply's body is the output: JSON (`application/json`, `*+json`) rendered compactly,
anything else as text (its charset, else UTF-8), at most `max_output_bytes` of it
(`truncated` says when there was more). Any other status is `http_status` with the status
and the body as the output: 429 and 5xx are retryable, every other 4xx is not, and a
redirect is never followed. No reply in `timeout_ms` is `http_timeout`, none at all
`http_unavailable` (both retryable).

The endpoint is the manifest's `endpoint`, or the value of the daemon's variable that
`endpoint_env` names; it must be an http(s) URL without `user:password@`, and the calling
agent's risk profile must list its `host:port` in `allowed_endpoints` — all decided before
any connection. The bearer token is read from the daemon's environment at the call, never
put in an agent's; it is cut out of whatever the service answers (`scrub`).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import msgspec

from ..config import endpoint_allowed, endpoint_key
from ..turns import HttpAdapterErrorCode, http_status_retryable
from ._model import DiscoveredItem
from ._registry import CallRefused

REDACTED_TEXT = "<redacted>"
REDACTED_BYTES = REDACTED_TEXT.encode()
DETAIL_CHARS = 300


class HttpAdapterRequest(msgspec.Struct, frozen=True):
    """The body of the POST: which capability, and the agent's input as it gave it."""

    capability: str
    input: str


def request_body(capability: str, input: str) -> bytes:
    return msgspec.json.encode(HttpAdapterRequest(capability, input))


# --- where a call may go ------------------------------------------------------------------


@dataclass(frozen=True)
class Reach:
    """An endpoint a call may use: the URL to POST to, its `host:port`, and what the
    approval question and the messages show of it (no query, no fragment)."""

    url: str
    endpoint: str
    shown: str


def http_endpoint(item: DiscoveredItem, env: Mapping[str, str]) -> str:
    """The URL an HTTP adapter (or an MCP server over HTTP) is reached at: its manifest's
    `endpoint`, else the value of the daemon's variable its `endpoint_env` names ("" when
    unset)."""
    if item.endpoint:
        return item.endpoint
    return env.get(item.endpoint_env, "").strip() if item.endpoint_env else ""


def shown_url(url: str) -> str:
    """`url` without its query and fragment (where signed URLs keep their secrets) and
    without any `user:password@`: what approval questions and messages name."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def reach(
    item: DiscoveredItem,
    *,
    agent: str,
    profile: str,
    allowed: tuple[str, ...],
    env: Mapping[str, str],
) -> Reach | CallRefused:
    """Whether `agent` (whose risk profile `profile` allows `allowed`) may reach `item`'s
    endpoint, decided before any connection: the endpoint is set and a usable http(s) URL,
    the profile lists its `host:port`, and the bearer token's variable is set."""
    ident = item.id
    url = http_endpoint(item, env)
    if not url:
        return CallRefused(
            "endpoint_invalid",
            f"{ident!r} reads its endpoint from ${item.endpoint_env}, which the daemon's "
            "environment does not set",
        )
    key = endpoint_key(url)
    parts = urlsplit(url)
    if key is None or parts.username is not None or parts.password is not None:
        where = f"${item.endpoint_env}" if not item.endpoint else "its endpoint"
        return CallRefused(
            "endpoint_invalid",
            f"{ident!r}: {where} is not an http(s) URL with a host (and no user:password@)",
        )
    if not endpoint_allowed(url, allowed):
        return CallRefused(
            "endpoint_not_allowed",
            f'{agent} may not reach {key} ({ident!r}): add "{key}" to '
            f"[risk_profiles.{profile}] allowed_endpoints",
        )
    if item.api_key_env and not env.get(item.api_key_env):
        return CallRefused(
            "api_key_missing",
            f"{ident!r} sends ${item.api_key_env} as its bearer token, which the daemon's "
            "environment does not set",
        )
    return Reach(url, key, shown_url(url))


# --- how the reply reads --------------------------------------------------------------------


@dataclass(frozen=True)
class HttpOutcome:
    """How an HTTP adapter's request ended: the reply's `status` (0: no reply came), the
    `output` (the body rendered, capped, the bearer token cut out), and for anything but a
    2xx an HttpAdapterErrorCode with a `detail` for people and whether to try again."""

    output: str = ""
    status: int = 0
    truncated: bool = False
    error: HttpAdapterErrorCode | None = None
    detail: str = ""
    retryable: bool = False


def read_limit(cap: int, secret: str) -> int:
    """How many bytes of a body to read for an output of at most `cap` bytes: a token
    the service echoes across the cap is whole in what was read, so it can be cut out."""
    return cap + len(secret.encode())


def scrub(data: bytes, secret: str, cut: bool) -> bytes:
    """`data` with every occurrence of `secret` replaced; when `data` was cut short
    (`cut`), a start of `secret` at its very end goes too."""
    if not secret:
        return data
    token = secret.encode()
    data = data.replace(token, REDACTED_BYTES)
    if cut:
        for length in range(min(len(token) - 1, len(data)), 0, -1):
            if data.endswith(token[:length]):
                return data[:-length]
    return data


def _media(content_type: str) -> tuple[str, str]:
    """(media type, charset) of a Content-Type header, lowercased; charset "" if none."""
    media, *params = (p.strip() for p in content_type.split(";"))
    charset = ""
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    return media.lower(), charset


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def _decode(data: bytes, charset: str, final: bool) -> str:
    try:
        decoder = codecs.getincrementaldecoder(charset or "utf-8")(errors="replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    # A multi-byte character cut at the cap is left out, not shown as a replacement.
    return decoder.decode(data, final=final)


def render_body(content_type: str, data: bytes, truncated: bool) -> str:
    """A reply's body as the agent reads it: JSON compactly (keys as sent, no spaces),
    anything else (and JSON cut short or not parseable) as text."""
    media, charset = _media(content_type)
    text = _decode(data, charset, final=not truncated)
    if _is_json(media) and not truncated:
        try:
            value: object = json.loads(text)
        except ValueError:
            return text
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text


def http_reply(
    *,
    status: int,
    content_type: str,
    content_encoding: str,
    body: bytes,
    cut: bool,
    cap: int,
    secret: str,
) -> HttpOutcome:
    """The outcome of a reply with `status` whose first bytes are `body` (`cut`: there
    were more), for an adapter whose output cap is `cap` bytes and whose bearer token is
    `secret` ("" for none)."""
    if content_encoding.strip().lower() not in ("", "identity"):
        return HttpOutcome(
            status=status,
            error="http_bad_reply",
            detail=f"HTTP {status} with Content-Encoding {content_encoding[:40]!r}, "
            "although identity was asked for",
        )
    scrubbed = scrub(body, secret, cut)
    truncated = cut or len(scrubbed) > cap
    text = render_body(content_type, scrubbed[:cap], truncated)
    text = scrub_text(text, secret)  # JSON escapes (\u0041) could spell it once decoded
    if 200 <= status <= 299:
        return HttpOutcome(text, status, truncated)
    return HttpOutcome(
        text,
        status,
        truncated,
        "http_status",
        f"HTTP {status}"
        + (" (redirects are not followed)" if 300 <= status <= 399 else "")
        + (f": {text[:DETAIL_CHARS]}" if text else ""),
        http_status_retryable(status),
    )


def scrub_text(text: str, secret: str) -> str:
    """`text` with every occurrence of `secret` replaced."""
    return text.replace(secret, REDACTED_TEXT) if secret else text


def no_reply(
    code: HttpAdapterErrorCode, detail: str, secret: str = "", *, retryable: bool = True
) -> HttpOutcome:
    """A request that got no (whole) reply: timed out, or never connected."""
    return HttpOutcome(
        error=code, detail=scrub_text(detail, secret)[:DETAIL_CHARS], retryable=retryable
    )
