"""A fallback chain: `model_provider = ["openai.main", "anthropic.backup", "offline.default"]`
(ADR 0058).

Each step goes to the first provider of the chain whose circuit breaker lets it through.
On its passing trouble (connection error, timeout, HTTP 429, 5xx: `ProviderError.fails_over`)
the next one answers, unless text of the failed answer already went out as deltas (a reader
would see two answers run together): then the step fails as it would without a chain. Any
other failure (a 4xx, an answer that is not the protocol) fails the step at once: the next
provider would be asked the same wrong question. The step that comes back says which
provider answered and which failed before it.

Each provider keeps its own retries (`max_retries`) before the chain moves on; a provider
that keeps failing is skipped for a while (its breaker, `_breaker.py`). Whenever a breaker
changes state the chain tells `on_health` (the agent posts it to the daemon for `status`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from ..turns import ProviderHealth
from ._breaker import CircuitBreaker
from ._types import Conversation, OnDelta, Provider, ProviderError, Step

OnHealth = Callable[[tuple[ProviderHealth, ...]], None]


def _no_health(health: tuple[ProviderHealth, ...]) -> None:
    return None


class ProviderChain:
    def __init__(
        self,
        members: Sequence[tuple[Provider, CircuitBreaker]],
        *,
        clock: Callable[[], float] = time.monotonic,
        on_health: OnHealth = _no_health,
    ) -> None:
        assert members, "a chain has at least one provider"
        self.members = tuple(members)
        self.name = "+".join(p.name for p, _ in self.members)
        self.clock = clock
        self.on_health = on_health

    def health(self) -> tuple[ProviderHealth, ...]:
        now = self.clock()
        return tuple(breaker.health(now) for _, breaker in self.members)

    async def complete(self, conversation: Conversation, on_delta: OnDelta) -> Step:
        failed: list[str] = []
        why: list[str] = []
        last: ProviderError | None = None
        for provider, breaker in self.members:
            before = (breaker.state, breaker.failures)
            if not breaker.allows(self.clock()):
                why.append(f"{provider.name} skipped (failing; {breaker.last_error})")
                continue
            said = False

            async def tracked(text: str) -> None:
                nonlocal said
                said = True
                await on_delta(text)

            try:
                step = await provider.complete(conversation, tracked)
            except ProviderError as exc:
                if not exc.fails_over:
                    breaker.succeeded()  # it answered: up, but it refused the request
                    self._changed(before, breaker)
                    raise
                breaker.failed(self.clock(), exc.cause)
                self._changed(before, breaker)
                if said:
                    raise  # half an answer went out: no second one after it
                failed.append(provider.name)
                why.append(str(exc))
                last = exc
                continue
            except BaseException:
                breaker.abandoned()
                raise
            breaker.succeeded()
            self._changed(before, breaker)
            return dataclasses.replace(step, provider=provider.name, failed=tuple(failed))
        kind = last.kind if last is not None else "connect"
        raise ProviderError(self.name, "no provider of the chain answered: " + "; ".join(why), kind)

    def _changed(self, before: tuple[str, int], breaker: CircuitBreaker) -> None:
        if (breaker.state, breaker.failures) != before:
            self.on_health(self.health())

    async def aclose(self) -> None:
        for provider, _ in self.members:
            await provider.aclose()
