"""How the daemon makes an HTTP adapter's request (ADR 0054): one POST, the thin trio shell
around `zeroclaw.discovery`'s pure half (what is sent, how the reply reads).

The discovery service has already checked the endpoint against the calling agent's
`allowed_endpoints`; this only connects there. httpx is imported at the first call, so a
daemon that never calls an HTTP adapter never loads an HTTP client. The client takes
nothing from the environment (`trust_env=False`: no proxy, no netrc, no CA override),
follows no redirect, asks for no content encoding, and reads at most the output cap (plus
the token's length, to cut an echoed token out whole); `timeout_ms` bounds the whole
exchange. The bearer token is read from the daemon's environment for this request only,
and cut out of the reply and of whatever the HTTP client logs while it runs.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping

import trio

from .._errno import errno_reason, first_errno
from .._version import __version__
from ..config import endpoint_key
from ..discovery import (
    AdapterRun,
    HttpOutcome,
    http_reply,
    no_reply,
    read_limit,
    redact_text,
    scrub_text,
)

log = logging.getLogger("zeroclaw.adapters")

USER_AGENT = f"zeroclaw/{__version__}"


class _ScrubTokens(logging.Filter):
    """On the HTTP client's loggers (httpx logs each request's URL at info, httpcore a
    reply's headers at debug): every token of a request in flight is cut out of each
    record, and what looks secret in a URL (`?api_key=`) is redacted."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: Counter[str] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        scrubbed = message
        for token in tuple(self.tokens):  # a record may come from another thread
            scrubbed = scrub_text(scrubbed, token)
        scrubbed = redact_text(scrubbed)
        if scrubbed != message:
            record.msg, record.args = scrubbed, ()
        return True


_SCRUB = _ScrubTokens()
# A logger's filters see only the records logged on it, not its children's: each one.
CLIENT_LOGGERS = (
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)


def _watch_logs(token: str) -> None:
    for name in CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if _SCRUB not in logger.filters:
            logger.addFilter(_SCRUB)
    if token:
        _SCRUB.tokens[token] += 1


def _unwatch_logs(token: str) -> None:
    if not token:
        return
    _SCRUB.tokens[token] -= 1
    if _SCRUB.tokens[token] <= 0:
        del _SCRUB.tokens[token]


def _why(exc: BaseException) -> str:
    cause = first_errno(exc)
    return errno_reason(cause) if cause is not None else type(exc).__name__


async def post(job: AdapterRun, daemon_env: Mapping[str, str]) -> HttpOutcome:
    """POST `job.body` to `job.endpoint`; the reply (or why none came), never raising for
    what the network or the server did."""
    import httpx

    token = daemon_env.get(job.api_key_env, "") if job.api_key_env else ""
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/plain;q=0.9, */*;q=0.5",
        "accept-encoding": "identity",
        "user-agent": USER_AGENT,
    }
    if token:
        headers["authorization"] = f"Bearer {token}"
    where = endpoint_key(job.endpoint) or "its endpoint"
    limit = read_limit(job.output_cap, token)
    _watch_logs(token)
    try:
        with trio.fail_after(job.timeout_secs):
            async with (
                httpx.AsyncClient(
                    trust_env=False,
                    follow_redirects=False,
                    timeout=httpx.Timeout(job.timeout_secs),
                ) as client,
                client.stream("POST", job.endpoint, content=job.body, headers=headers) as reply,
            ):
                body = bytearray()
                cut = False
                async for chunk in reply.aiter_raw():
                    body += chunk
                    if len(body) > limit:
                        cut = True
                        break
                return http_reply(
                    status=reply.status_code,
                    content_type=reply.headers.get("content-type", ""),
                    content_encoding=reply.headers.get("content-encoding", ""),
                    body=bytes(body[:limit]),
                    cut=cut,
                    cap=job.output_cap,
                    secret=token,
                )
    except (trio.TooSlowError, httpx.TimeoutException):
        return no_reply(
            "http_timeout", f"{where}: no whole reply within {job.timeout_secs:g}s", token
        )
    except httpx.InvalidURL as exc:  # checked before; httpx's parser is the stricter one
        reason = redact_text(str(exc))
        return no_reply("http_unavailable", f"{where}: {reason}", token, retryable=False)
    except (httpx.HTTPError, OSError) as exc:
        log.info("adapter %s: cannot reach %s: %s", job.server, where, _why(exc))
        return no_reply("http_unavailable", f"cannot reach {where}: {_why(exc)}", token)
    finally:
        _unwatch_logs(token)
