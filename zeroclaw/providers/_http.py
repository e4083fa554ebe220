"""HTTP for network providers: one pooled client, retries with backoff, SSE parsing, and
the whole-JSON answer some proxies give to a streamed request.

Only this module, the lean client (`_lean_http`) and the two network providers import httpx,
so agents on the offline provider never load it (ADR 0009). The request itself goes through
the lean client (h11 over trio, ADR 0068) unless the environment names a proxy: then
through httpx's `AsyncClient`, which honours it.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import random
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import trio

from .._decode import DecodeFailure, decode_json
from ..turns import TokenUsage
from ._lean_http import LeanClient, LeanResponse, proxied
from ._types import OnDelta, ProviderError, Step, ToolCall, ToolSpec, status_failure

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
BACKOFF_INITIAL = 0.5
BACKOFF_MAX = 8.0
RETRY_AFTER_MAX = 30.0
MAX_ERROR_BODY = 300
# What is read of an error answer's body: its message is near the start, and a server that
# never ends the body must not hold the step (nor grow the agent's memory) for ever.
MAX_ERROR_READ = 64 * 1024
MAX_JSON_BYTES = 8 * 1024 * 1024  # one event, one tool call's arguments, one error body
# One streamed answer, whole: far beyond any model's longest, and a server streaming without
# end (text, comments, a line that never ends) is cut rather than fill the agent's memory.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
BODY_HEAD = 200  # bytes of an unreadable body shown in its error

# httpx logs every request at info (and httpcore every step at debug): a line per model
# call, written on the turn's path, saying nothing the turn's own log does not (ADR 0038).
for _name in ("httpx", "httpcore"):
    logging.getLogger(_name).setLevel(logging.WARNING)


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


class EncodedTools:
    """A toolset's specs as JSON, rendered once per toolset rather than once per request:
    the specs tuple of a toolset is built once and kept (tools/_toolset.py), so its
    identity is the key; a few toolsets live in a process, so the cache stays small."""

    def __init__(self, render: Callable[[tuple[ToolSpec, ...]], list[dict[str, Any]]]) -> None:
        self._render = render
        self._cache: dict[int, tuple[tuple[ToolSpec, ...], msgspec.Raw]] = {}

    def __call__(self, specs: tuple[ToolSpec, ...]) -> msgspec.Raw:
        hit = self._cache.get(id(specs))
        if hit is not None and hit[0] is specs:
            return hit[1]
        if len(self._cache) >= 64:  # specs built per call by someone: do not grow forever
            self._cache.clear()
        raw = msgspec.Raw(_encoder.encode(self._render(specs)))
        self._cache[id(specs)] = (specs, raw)
        return raw


_encoder = msgspec.json.Encoder()


def encode_body(payload: dict[str, Any]) -> bytes:
    """A request body as JSON (msgspec: a pre-rendered `msgspec.Raw` goes in as is)."""
    return _encoder.encode(payload)


class StreamedStep:
    """What one streamed response adds up to: text deltas (passed on as they come) and
    tool calls assembled from fragments by index. Each protocol's parser feeds it."""

    def __init__(self, provider: str, on_delta: OnDelta, id_prefix: str) -> None:
        self.provider = provider
        self.on_delta = on_delta
        self.id_prefix = id_prefix
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}  # index -> id, name, args (JSON text)
        self.usage: TokenUsage | None = None  # as the server reported it, if it did

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
                decoded = decode_json(raw["args"] or "{}", max_bytes=MAX_JSON_BYTES)
            except DecodeFailure:  # broken, huge or nested too deeply
                decoded = None
            # Not a JSON object: the engine answers it as bad_arguments.
            args = decoded if isinstance(decoded, dict) else {"_unparsed": raw["args"]}
            calls.append(ToolCall(raw["name"], args, raw["id"] or f"{self.id_prefix}{index}"))
        text = "".join(self.text) or None
        # A step that sent a prompt used tokens: a server saying none (a proxy that does
        # not count, or one that lies) said nothing, and the turn estimates the step, or
        # every step it answered would be free and no budget ever spent.
        usage = self.usage if self.usage is not None and self.usage.total > 0 else None
        return Step(
            tool_calls=tuple(calls),
            text=text,
            streamed=text is not None,
            usage=usage,
            provider=self.provider,
        )


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
            seconds = float(retry_after)
        except ValueError:
            seconds = math.nan
        if math.isfinite(seconds):  # "nan" is a float too, and trio cannot sleep it
            return min(max(seconds, 0.0), RETRY_AFTER_MAX)
    base = min(BACKOFF_INITIAL * 2 ** (attempt - 1), BACKOFF_MAX)
    return float(base * (0.5 + random.random() / 2))


def load_json(provider: str, text: str) -> Any:
    """One JSON document from the server; ProviderError for anything else, however deep
    or large (ADR 0014)."""
    try:
        return decode_json(text, max_bytes=MAX_JSON_BYTES)
    except DecodeFailure as exc:
        raise ProviderError(
            provider, f"malformed response: not JSON ({exc.detail}): {text[:BODY_HEAD]!r}"
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
        answer_timeout_secs: float = 600.0,
    ) -> None:
        self.provider = provider
        self.max_retries = max_retries
        self.answer_timeout_secs = answer_timeout_secs
        self.retries = 0  # how many retries this client made, for tests and stats
        self._settings = (base_url.rstrip("/") + "/", headers, timeout_secs)

    @functools.cached_property
    def _client(self) -> LeanClient | httpx.AsyncClient:
        """Built at the first request: an agent that idles never holds one (building it
        touches ~1 MB of pages shared with the zygote, ADR 0036). The lean client, or
        httpx's when the environment names a proxy (ADR 0068)."""
        base_url, headers, timeout_secs = self._settings
        timeout = httpx.Timeout(timeout_secs, connect=min(timeout_secs, 10.0))
        if not proxied():
            return LeanClient(base_url, headers=headers, timeout=timeout, ssl_context=tls_context())
        return httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=timeout,
            follow_redirects=False,
            verify=tls_context(),
        )

    async def aclose(self) -> None:
        if "_client" in self.__dict__:  # never built: nothing to close
            await self._client.aclose()

    async def stream(
        self,
        path: str,
        body: bytes,
        on_event: Callable[[SseEvent], Awaitable[None]],
        on_json: Callable[[Any], Awaitable[None]],
    ) -> None:
        """POST `body` (JSON) and feed the answer's events to `on_event` as they come; a
        server that answers the streamed request with one JSON document instead (some
        proxies do) goes to `on_json` whole. The body's first byte decides, not its content
        type (proxies relabel). Retries happen only before the first event arrives, so no half
        answer is ever repeated. The whole of it, retries included, has answer_timeout_secs:
        the client's own timeouts bound each wait for bytes, not an answer that trickles."""
        with trio.move_on_after(self.answer_timeout_secs):
            await self._stream(path, body, on_event, on_json)
            return
        raise ProviderError(
            self.provider,
            f"no whole answer in {self.answer_timeout_secs:g} s (answer_timeout_secs)",
            "timeout",
        )

    async def _stream(
        self,
        path: str,
        body: bytes,
        on_event: Callable[[SseEvent], Awaitable[None]],
        on_json: Callable[[Any], Awaitable[None]],
    ) -> None:
        attempt = 0
        started = False
        while True:
            attempt += 1
            try:
                async with self._client.stream("POST", path, content=body) as response:
                    if response.status_code != 200:
                        text = (await _read_head(response)).decode(errors="replace")
                        if response.status_code in RETRY_STATUSES and attempt <= self.max_retries:
                            delay = backoff_delay(attempt, response.headers.get("retry-after"))
                            self.retries += 1
                            await trio.sleep(delay)
                            continue
                        raise ProviderError(
                            self.provider,
                            f"HTTP {response.status_code} from {shown_url(response.url)}: "
                            f"{_error_text(text)}",
                            status_failure(response.status_code),
                            response.status_code,
                        )
                    kind = media_type(response.headers.get("content-type", ""))
                    chunks = response.aiter_bytes()
                    first = b""
                    async for chunk in chunks:  # up to the first byte that is not blank
                        first += chunk
                        if first.strip():
                            break
                        if len(first) > MAX_JSON_BYTES:  # blanks without end: never an answer
                            raise unreadable(self.provider, kind, first)
                    if first.lstrip()[:1] in (b"{", b"["):
                        # One JSON document (no event stream starts so), whatever the
                        # content type says: the answer is here, never asked again.
                        started = True
                        whole = await _read_bounded(first, chunks, self.provider)
                        await answer_whole(self.provider, kind, whole, on_json)
                    else:
                        # Events, as they come, under any content type (a proxy may relabel).
                        reader = _EventReader(on_event)
                        started = await reader.feed(first)
                        size = len(first)
                        async for chunk in chunks:
                            size += len(chunk)
                            if size > MAX_ANSWER_BYTES:  # a stream without end: never an answer
                                raise ProviderError(
                                    self.provider,
                                    f"malformed response: an answer over {MAX_ANSWER_BYTES} bytes",
                                )
                            started = await reader.feed(chunk) or started
                        await reader.close()
                        if reader.events == 0 and reader.head.strip():
                            raise unreadable(self.provider, kind, reader.head)
                    return
            except httpx.TimeoutException:
                if attempt <= self.max_retries and not started:
                    self.retries += 1
                    await trio.sleep(backoff_delay(attempt, None))
                    continue
                tries = f"{attempt} attempt" + ("s" if attempt > 1 else "")
                raise ProviderError(self.provider, f"timed out after {tries}", "timeout") from None
            except httpx.TransportError as exc:
                if attempt <= self.max_retries and not started:
                    self.retries += 1
                    await trio.sleep(backoff_delay(attempt, None))
                    continue
                raise ProviderError(
                    self.provider,
                    f"cannot reach {shown_url(self._client.base_url)}: {exc}",
                    "connect",
                ) from None


def shown_url(url: httpx.URL) -> str:
    """A provider's URL as its errors show it: without `user:password@`, query or fragment,
    where a proxy's credentials or key may be. An error becomes the turn's reply (to an
    outside sender too), `status` and a provider.breaker event."""
    return str(url.copy_with(userinfo=b"", query=None, fragment=None))


def media_type(content_type: str) -> str:
    """`text/event-stream; charset=utf-8` -> `text/event-stream`. Pure."""
    return content_type.partition(";")[0].strip().lower()


def body_head(body: bytes) -> str:
    """The first bytes of a body we could not read, for the error: the server's own words
    (no key is ever in a response body), quoted so control characters show."""
    return repr(body[:BODY_HEAD].decode("utf-8", errors="replace"))


def unreadable(provider: str, kind: str, body: bytes) -> ProviderError:
    return ProviderError(
        provider,
        f"malformed response: neither server-sent events nor JSON "
        f"({kind or 'no content-type'}): {body_head(body)}",
    )


async def answer_whole(
    provider: str, kind: str, body: bytes, on_json: Callable[[Any], Awaitable[None]]
) -> None:
    """A whole (not streamed) answer to a streamed request: one JSON document goes to
    `on_json`; anything else is a ProviderError carrying the body's first bytes."""
    try:
        data = decode_json(body, max_bytes=MAX_JSON_BYTES)
    except DecodeFailure:
        raise unreadable(provider, kind, body) from None
    await on_json(data)


async def _read_head(response: httpx.Response | LeanResponse) -> bytes:
    """At most MAX_ERROR_READ bytes of an error answer's body; the rest is never read."""
    head = b""
    async for chunk in response.aiter_bytes():
        head += chunk
        if len(head) >= MAX_ERROR_READ:
            break
    return head[:MAX_ERROR_READ]


async def _read_bounded(first: bytes, rest: AsyncIterator[bytes], provider: str) -> bytes:
    chunks = [first]
    size = len(first)
    async for chunk in rest:
        size += len(chunk)
        if size > MAX_JSON_BYTES:
            raise ProviderError(
                provider, f"malformed response: a whole answer over {MAX_JSON_BYTES} bytes"
            )
        chunks.append(chunk)
    return b"".join(chunks)


class _EventReader:
    """Bytes as they arrive -> lines -> server-sent events, keeping the body's first bytes
    for an error that has to show them."""

    def __init__(self, on_event: Callable[[SseEvent], Awaitable[None]]) -> None:
        self.on_event = on_event
        self.parser = SseParser()
        self.rest: list[bytes] = []  # the line not ended yet, in pieces (joined once ended)
        self.head = b""
        self.events = 0

    async def feed(self, chunk: bytes) -> bool:
        """True once any event went out."""
        if len(self.head) < BODY_HEAD:
            self.head += chunk[: BODY_HEAD - len(self.head)]
        if b"\n" not in chunk:  # a long line is joined once, not again at each chunk
            self.rest.append(chunk)
            return self.events > 0
        *lines, rest = b"".join([*self.rest, chunk]).split(b"\n")
        self.rest = [rest]
        for line in lines:
            await self._line(line)
        return self.events > 0

    async def close(self) -> None:
        rest = b"".join(self.rest)
        self.rest = []
        if rest:
            await self._line(rest)
        last = self.parser.close()
        if last is not None:
            self.events += 1
            await self.on_event(last)

    async def _line(self, line: bytes) -> None:
        event = self.parser.feed(line.rstrip(b"\r").decode("utf-8", errors="replace"))
        if event is not None:
            self.events += 1
            await self.on_event(event)


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
