"""A hostile model provider at the head of a fallback chain (issue 27 attack pass): what it
sends back must fail its own step as passing trouble, so the next provider answers, and
never take the agent's turn (or its memory) with it. Real loopback servers, real clients."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from tests.providers.protocol_server import TEXT, ScriptedServer, Seen, Writer, status
from tests.providers.test_chain import ask, chain, spec
from tests.providers.test_network import KEY
from zeroclaw.providers import NamedProvider, OfflineSpec, ProviderChain, make_chain


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
