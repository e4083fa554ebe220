"""HTTP for network providers: one pooled client, retries with backoff, SSE parsing.

Only this module and the two network providers import httpx, so agents on the offline
provider never load it (ADR 0009).
"""

from __future__ import annotations

import functools
import os
import random
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import trio

from .._decode import DecodeFailure, decode_json
from ._types import OnDelta, ProviderError, Step, ToolCall

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
BACKOFF_INITIAL = 0.5
BACKOFF_MAX = 8.0
RETRY_AFTER_MAX = 30.0
MAX_ERROR_BODY = 300
MAX_JSON_BYTES = 8 * 1024 * 1024  # one event, one tool call's arguments, one error body


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: str


class SseParser:
    """Server-sent events, line by line (the text/event-stream format). Pure."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> SseEvent | None:
        if not line:
            if not self._data and not self._event:
                return None
            event = SseEvent(self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None

    def close(self) -> SseEvent | None:
        return self.feed("")


class StreamedStep:
    """What one streamed response adds up to: text deltas (passed on as they come) and
    tool calls assembled from fragments by index. Each protocol's parser feeds it."""

    def __init__(self, provider: str, on_delta: OnDelta, id_prefix: str) -> None:
        self.provider = provider
        self.on_delta = on_delta
        self.id_prefix = id_prefix
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}  # index -> id, name, args (JSON text)

    async def text_delta(self, text: str) -> None:
        if text:
            self.text.append(text)
            await self.on_delta(text)

    def call(self, index: int) -> dict[str, str]:
        return self.calls.setdefault(index, {"id": "", "name": "", "args": ""})

    def malformed(self, what: str) -> ProviderError:
        return ProviderError(self.provider, f"malformed response: {what}")

    def step(self) -> Step:
        calls = []
        for index in sorted(self.calls):
            raw = self.calls[index]
            try:
                args = decode_json(raw["args"] or "{}", max_bytes=MAX_JSON_BYTES)
            except DecodeFailure:  # broken, huge or nested too deeply
                args = {"_unparsed": raw["args"]}  # the engine answers it as bad_arguments
            calls.append(ToolCall(raw["name"], args, raw["id"] or f"{self.id_prefix}{index}"))
        text = "".join(self.text) or None
        return Step(tool_calls=tuple(calls), text=text, streamed=text is not None)


@functools.cache
def _tls_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    del cafile, capath  # the cache key: httpx reads them from os.environ itself
    return httpx.create_ssl_context()


def tls_context() -> ssl.SSLContext:
    """The process's one verifying TLS context (httpx's default: certifi's bundle, or
    $SSL_CERT_FILE / $SSL_CERT_DIR). Built once: loading a CA bundle costs ~50 ms and
    ~1 MB, and made in the zygote it is shared by every agent forked after (ADR 0036)."""
    return _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


def warm_http() -> None:
    """Load what httpx loads lazily when the first client is built (httpcore, h11, h2,
    certifi, anyio) and the TLS context. The client is never used: no socket is opened."""
    httpx.AsyncClient(verify=tls_context())


def backoff_delay(attempt: int, retry_after: str | None) -> float:
    """Seconds before retry `attempt` (1-based): the server's Retry-After when it gives
    one (capped), else exponential with jitter."""
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 0.0), RETRY_AFTER_MAX)
        except ValueError:
            pass
    base = min(BACKOFF_INITIAL * 2 ** (attempt - 1), BACKOFF_MAX)
    return float(base * (0.5 + random.random() / 2))


def load_json(provider: str, text: str) -> Any:
    """One JSON document from the server; ProviderError for anything else, however deep
    or large (ADR 0014)."""
    try:
        return decode_json(text, max_bytes=MAX_JSON_BYTES)
    except DecodeFailure as exc:
        raise ProviderError(
            provider, f"malformed response: not JSON ({exc.detail}): {text[:80]!r}"
        ) from None


class HttpModel:
    """POST a JSON body and read the answer as server-sent events, with retries."""

    def __init__(
        self,
        provider: str,
        base_url: str,
        *,
        headers: dict[str, str],
        timeout_secs: float,
        max_retries: int,
    ) -> None:
        self.provider = provider
        self.max_retries = max_retries
        self.retries = 0  # how many retries this client made, for tests and stats
        self._settings = (base_url.rstrip("/") + "/", headers, timeout_secs)

    @functools.cached_property
    def _client(self) -> httpx.AsyncClient:
        """Built at the first request: an agent that idles never holds one (building it
        touches ~1 MB of pages shared with the zygote, ADR 0036)."""
        base_url, headers, timeout_secs = self._settings
        return httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_secs, connect=min(timeout_secs, 10.0)),
            follow_redirects=False,
            verify=tls_context(),
        )

    async def aclose(self) -> None:
        if "_client" in self.__dict__:  # never built: nothing to close
            await self._client.aclose()

    async def stream(
        self, path: str, payload: dict[str, Any], on_event: Callable[[SseEvent], Awaitable[None]]
    ) -> None:
        """Feed the events of one request to `on_event`. Retries happen only before the
        first event arrives, so no half answer is ever repeated."""
        attempt = 0
        started = False
        while True:
            attempt += 1
            try:
                async with self._client.stream("POST", path, json=payload) as response:
                    if response.status_code != 200:
                        body = (await response.aread()).decode(errors="replace")
                        if response.status_code in RETRY_STATUSES and attempt <= self.max_retries:
                            delay = backoff_delay(attempt, response.headers.get("retry-after"))
                            self.retries += 1
                            await trio.sleep(delay)
                            continue
                        raise ProviderError(
                            self.provider,
                            f"HTTP {response.status_code} from {response.url}: {_error_text(body)}",
                        )
                    parser = SseParser()
                    async for line in response.aiter_lines():
                        event = parser.feed(line.rstrip("\r"))
                        if event is not None:
                            started = True
                            await on_event(event)
                    last = parser.close()
                    if last is not None:
                        await on_event(last)
                    return
            except httpx.TimeoutException:
                if attempt <= self.max_retries and not started:
                    self.retries += 1
                    await trio.sleep(backoff_delay(attempt, None))
                    continue
                tries = f"{attempt} attempt" + ("s" if attempt > 1 else "")
                raise ProviderError(self.provider, f"timed out after {tries}") from None
            except httpx.TransportError as exc:
                if attempt <= self.max_retries and not started:
                    self.retries += 1
                    await trio.sleep(backoff_delay(attempt, None))
                    continue
                raise ProviderError(
                    self.provider, f"cannot reach {self._client.base_url}: {exc}"
                ) from None


def _error_text(body: str) -> str:
    """The server's own error message when it sent one, else the start of the body."""
    try:
        data = decode_json(body, max_bytes=MAX_JSON_BYTES)
    except DecodeFailure:
        return body[:MAX_ERROR_BODY] or "(empty body)"
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:MAX_ERROR_BODY]
        if isinstance(error, str):
            return error[:MAX_ERROR_BODY]
    return body[:MAX_ERROR_BODY]
