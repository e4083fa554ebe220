"""A hostile model provider at the head of a fallback chain (issue 27 attack pass): what it
sends back must fail its own step as passing trouble, so the next provider answers, and
never take the agent's turn (or its memory) with it. Real loopback servers, real clients."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from tests.conftest import PATIENCE
from tests.providers.protocol_server import TEXT, Answer, ScriptedServer, Seen, Writer, status
from tests.providers.test_chain import ask, chain, refused_url, spec
from tests.providers.test_network import KEY, conversation
from tests.providers.test_network import make as make_provider
from zeroclaw.providers import (
    NamedProvider,
    OfflineSpec,
    ProviderChain,
    ProviderError,
    make_chain,
)
from zeroclaw.providers._http import MAX_ANSWER_BYTES


@pytest.fixture
async def backup() -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer([], default=TEXT["anthropic"]("backup ", "answers"))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        yield server
        nursery.cancel_scope.cancel()


def retrying_chain(main_url: str, backup_url: str) -> ProviderChain:
    built = make_chain(
        [
            NamedProvider("openai.main", spec("openai", main_url, max_retries=2)),
            NamedProvider("anthropic.backup", spec("anthropic", backup_url)),
            NamedProvider("offline.default", OfflineSpec()),
        ],
        {"TEST_API_KEY": KEY},
    )
    assert isinstance(built, ProviderChain)
    return built


@pytest.mark.parametrize("retry_after", ["nan", "NaN", "-nan", "inf", "-1e999", "1e999"])
async def test_a_retry_after_that_is_no_number_of_seconds_does_not_escape_the_chain(
    retry_after: str, server: ScriptedServer, backup: ScriptedServer
) -> None:
    # trio.sleep(nan) raises ValueError: before the fix the turn failed with it (not a
    # ProviderError), so the chain never asked the next provider.
    server.default = status(429, "slow down", {"retry-after": retry_after})
    provider = retrying_chain(server.url, backup.url)
    try:
        step = await ask(provider)
    finally:
        await provider.aclose()
    assert step.provider == "anthropic.backup" and step.text == "backup answers"
    assert len(server.seen) == 3  # its own retries came first, each soon


async def endless_error(seen: Seen, write: Writer) -> None:
    """A 503 whose body never ends: 64 KiB after 64 KiB, as fast as it is read."""
    await write(
        b"HTTP/1.1 503 X\r\ncontent-type: application/json\r\n"
        b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )
    chunk = b"x" * 65536
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    try:
        while True:
            await write(frame)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return  # the client stopped reading and hung up: what it should do


async def test_an_error_body_without_end_is_cut_and_the_next_provider_answers(
    server: ScriptedServer, backup: ScriptedServer
) -> None:
    # Before the fix the whole error body was read into memory: a server that never
    # ended it held the step (and grew the agent's memory) forever, with no fallback.
    server.default = endless_error
    provider = chain(server.url, backup.url, [])
    try:
        step = await ask(provider)
    finally:
        await provider.aclose()
    assert step.provider == "anthropic.backup" and step.failed == ("openai.main",)


URL_SECRET = "proxy-pass-5521"


@pytest.mark.parametrize("where", ["userinfo", "query"])
async def test_a_secret_in_a_providers_url_is_not_in_the_error_a_sender_is_answered(
    where: str, server: ScriptedServer, backup: ScriptedServer
) -> None:
    # The chain's error becomes the turn's reply (to whoever sent the message, an outside
    # sender too), `status` and the provider.breaker event: it named each provider's URL
    # whole, so a proxy's `user:pass@` or `?key=` went with it.
    server.default = status(500, "down")
    host = server.url.removeprefix("http://")
    if where == "userinfo":
        main_url, dead_url = f"http://relay:{URL_SECRET}@{host}", f"http://relay:{URL_SECRET}@"
    else:
        main_url, dead_url = f"{server.url}/q?key={URL_SECRET}#", "http://"
    dead_url += refused_url().removeprefix("http://") + (
        f"/q?key={URL_SECRET}#" if where == "query" else ""
    )
    built = make_chain(
        [
            NamedProvider("openai.main", spec("openai", main_url)),
            NamedProvider("openai.dead", spec("openai", dead_url)),
        ],
        {"TEST_API_KEY": KEY},
    )
    assert isinstance(built, ProviderChain)
    try:
        with pytest.raises(ProviderError) as caught:
            await ask(built)
    finally:
        await built.aclose()
    said = str(caught.value)
    assert "HTTP 500 from" in said and "cannot reach" in said, said
    assert URL_SECRET not in said
    assert all(URL_SECRET not in h.last_error for h in built.health())


def endless(line: bytes) -> Answer:
    """A 200 event stream that never ends: `line` again and again, as fast as it is read."""

    async def answer(seen: Seen, write: Writer) -> None:
        await write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        )
        block = line * max(1, 65536 // len(line))
        try:
            while True:
                await write(block)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    return answer


DELTA = b'data: {"choices": [{"index": 0, "delta": {"content": "ha"}}]}\n\n'


@pytest.mark.parametrize(
    "line", [DELTA, b": keep-alive\n", b"x"], ids=["text", "comments", "one-line"]
)
async def test_a_stream_without_end_is_cut(line: bytes, server: ScriptedServer) -> None:
    # Before the fix the answer grew for ever: its text (and every delta sent on), or the
    # one line never ended (re-joined at each chunk: quadratic), or comments held the step.
    server.default = endless(line)
    provider = make_provider("openai", server.url)
    deltas = 0

    async def on_delta(text: str) -> None:
        nonlocal deltas
        deltas += 1

    try:
        with trio.fail_after(PATIENCE), pytest.raises(ProviderError) as caught:
            await provider.complete(conversation(), on_delta)
    finally:
        await provider.aclose()
    assert f"an answer over {MAX_ANSWER_BYTES} bytes" in str(caught.value)
    assert not caught.value.fails_over  # a hostile answer, not passing trouble
