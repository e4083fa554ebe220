"""Fallback chains against loopback servers that fail in each way a chain falls over on
(refused connections, a server that hangs, 429, 500), and those it does not (issue 27)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import trio

from tests.conftest import PATIENCE
from tests.providers.protocol_server import (
    TEXT,
    Answer,
    ScriptedServer,
    sse,
    stall,
    status,
)
from tests.providers.test_network import KEY, conversation, no_delta
from zeroclaw.providers import (
    NamedProvider,
    OfflineSpec,
    ProviderChain,
    ProviderError,
    ProviderSpec,
    make_chain,
)
from zeroclaw.turns import ProviderHealth


def spec(kind: str, url: str, **extra: Any) -> ProviderSpec:
    config: dict[str, Any] = {
        "model": "m",
        "api_key_env": "TEST_API_KEY",
        "timeout_secs": 0.5,  # a server that hangs is given up on soon
        "max_retries": 0,  # the chain moves on at once
        "breaker_failures": 2,
        "breaker_open_secs": 60.0,
        **extra,
    }
    if kind == "openai":
        config["base_url"] = url + "/v1"
    else:
        config["base_url"] = url
        config["max_tokens"] = 64
    return msgspec.convert({"kind": kind, **config}, ProviderSpec)


def refused_url() -> str:
    """A loopback port nothing listens on: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
async def backup() -> AsyncIterator[ScriptedServer]:
    """The second provider's server: it always answers."""
    server = ScriptedServer([], default=TEXT["anthropic"]("backup ", "answers"))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        yield server
        nursery.cancel_scope.cancel()


def chain(
    main_url: str, backup_url: str, health: list[tuple[ProviderHealth, ...]]
) -> ProviderChain:
    built = make_chain(
        [
            NamedProvider("openai.main", spec("openai", main_url)),
            NamedProvider("anthropic.backup", spec("anthropic", backup_url)),
            NamedProvider("offline.default", OfflineSpec()),
        ],
        {"TEST_API_KEY": KEY},
        on_health=health.append,
    )
    assert isinstance(built, ProviderChain)
    return built


async def ask(provider: ProviderChain, deltas: list[str] | None = None) -> Any:
    async def on_delta(text: str) -> None:
        if deltas is not None:
            deltas.append(text)

    with trio.fail_after(PATIENCE):
        return await provider.complete(conversation(), on_delta)


FAILING: dict[str, Answer] = {
    "hangs": stall,
    "429": status(429, "slow down"),
    "500": status(500, "boom"),
    "503": status(503, "overloaded"),
}


@pytest.mark.parametrize("failure", ["refuses connections", *FAILING])
async def test_the_next_provider_answers_when_the_first_fails_so(
    failure: str, server: ScriptedServer, backup: ScriptedServer
) -> None:
    if failure == "refuses connections":
        url = refused_url()
    else:
        server.default = FAILING[failure]
        url = server.url
    health: list[tuple[ProviderHealth, ...]] = []
    provider = chain(url, backup.url, health)
    try:
        step = await ask(provider)
    finally:
        await provider.aclose()
    assert step.text == "backup answers"
    assert step.provider == "anthropic.backup" and step.failed == ("openai.main",)
    assert len(backup.seen) == 1
    first = health[-1][0]
    assert (first.provider, first.state, first.failures) == ("openai.main", "closed", 1)


@pytest.mark.parametrize("code", [400, 401, 404, 422])
async def test_a_request_the_server_refuses_is_not_asked_of_the_next(
    code: int, server: ScriptedServer, backup: ScriptedServer
) -> None:
    server.default = status(code, "bad request")
    provider = chain(server.url, backup.url, [])
    try:
        with pytest.raises(ProviderError) as caught:
            await ask(provider)
    finally:
        await provider.aclose()
    assert caught.value.kind == "refused" and caught.value.status == code
    assert backup.seen == []


async def test_after_half_an_answer_went_out_there_is_no_second_one(
    server: ScriptedServer, backup: ScriptedServer
) -> None:
    # The server fails mid-answer (an error it sends in its stream: a passing trouble).
    server.default = sse(
        [
            (None, {"choices": [{"index": 0, "delta": {"content": "Hal"}}]}),
            (None, {"error": {"message": "overloaded"}}),
        ]
    )
    provider = chain(server.url, backup.url, [])
    deltas: list[str] = []
    try:
        with pytest.raises(ProviderError) as caught:
            await ask(provider, deltas)
    finally:
        await provider.aclose()
    assert caught.value.fails_over and "overloaded" in str(caught.value)
    assert deltas == ["Hal"] and backup.seen == []


async def test_a_provider_that_keeps_failing_is_skipped_until_its_breaker_lets_a_trial(
    server: ScriptedServer, backup: ScriptedServer
) -> None:
    server.default = status(503, "down")
    health: list[tuple[ProviderHealth, ...]] = []
    provider = chain(server.url, backup.url, health)
    clock = [1000.0]
    provider.clock = lambda: clock[0]
    try:
        for _ in range(2):  # breaker_failures = 2
            assert (await ask(provider)).provider == "anthropic.backup"
        assert len(server.seen) == 2
        assert health[-1][0].state == "open" and health[-1][0].retry_in_secs == 60.0
        step = await ask(provider)  # skipped: never asked
        assert step.provider == "anthropic.backup" and step.failed == ()
        assert len(server.seen) == 2
        clock[0] += 60.0  # its time passed: one trial, which succeeds
        server.default = TEXT["openai"]("main ", "is back")
        step = await ask(provider)
        assert step.provider == "openai.main" and step.text == "main is back"
        assert [h.state for h in provider.health()] == ["closed", "closed", "closed"]
    finally:
        await provider.aclose()


async def test_when_every_network_provider_fails_the_offline_one_answers(
    server: ScriptedServer,
) -> None:
    server.default = status(500, "down")
    provider = chain(refused_url(), server.url, [])
    try:
        step = await ask(provider)
    finally:
        await provider.aclose()
    assert step.provider == "offline.default"
    assert step.failed == ("openai.main", "anthropic.backup")
    assert step.usage is not None  # the offline provider's own count


async def test_a_chain_where_nobody_answers_says_why_for_each(server: ScriptedServer) -> None:
    server.default = status(503, "down")
    provider = make_chain(
        [
            NamedProvider("openai.main", spec("openai", refused_url())),
            NamedProvider("openai.other", spec("openai", server.url)),
        ],
        {"TEST_API_KEY": KEY},
    )
    try:
        with pytest.raises(ProviderError) as caught:
            with trio.fail_after(PATIENCE):
                await provider.complete(conversation(), no_delta)
    finally:
        await provider.aclose()
    message = str(caught.value)
    assert "openai.main" in message and "cannot reach" in message
    assert "openai.other" in message and "HTTP 503" in message
    assert caught.value.kind == "server" and caught.value.fails_over


async def test_one_provider_is_no_chain() -> None:
    provider = make_chain([NamedProvider("offline.default", OfflineSpec())], {})
    assert not isinstance(provider, ProviderChain)
    assert provider.name == "offline.default"
