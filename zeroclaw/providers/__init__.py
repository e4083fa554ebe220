"""Model providers: `offline` (built in, deterministic), `openai`-compatible, `anthropic`.

`make_provider` builds the one an agent is configured with. Network providers import
httpx only when built, so an offline agent never loads it. Providers know tools only as
the `ToolSpec`s a turn's conversation carries (its toolset), never a global list.
"""

from collections.abc import Iterable, Mapping, Sequence

from ._breaker import BreakerSettings, CircuitBreaker
from ._chain import OnHealth, ProviderChain
from ._context import CONTEXT_PREAMBLE, render_context
from ._offline import (
    GRAMMAR_HELP,
    GRAMMAR_TOOLS,
    OfflineProvider,
    first_step,
    grammar_help,
    memory_key,
    parse,
    reply,
)
from ._spec import AnthropicSpec, NamedProvider, OfflineSpec, OpenAISpec, ProviderSpec
from ._summary import SUMMARY_INSTRUCTIONS, SUMMARY_REQUEST, Summarised, parse_summary
from ._types import (
    FAILOVER_KINDS,
    FAILURE_KINDS,
    Conversation,
    FailureKind,
    HistoryTurn,
    OnDelta,
    Provider,
    ProviderError,
    Recalled,
    Recap,
    Round,
    Step,
    ToolCall,
    ToolOutcome,
    ToolSpec,
)
from ._usage import estimate as estimate_usage


def make_provider(reference: str, config: ProviderSpec, env: Mapping[str, str]) -> Provider:
    """The provider `kind.alias` built from its settings; keys come from `env` only."""
    _, _, alias = reference.partition(".")
    if isinstance(config, OfflineSpec):
        return OfflineProvider(reference)
    if isinstance(config, OpenAISpec):
        from ._openai import OpenAIProvider

        return OpenAIProvider(alias, config, env)
    from ._anthropic import AnthropicProvider

    return AnthropicProvider(alias, config, env)


def make_chain(
    members: Sequence[NamedProvider],
    env: Mapping[str, str],
    *,
    on_health: OnHealth | None = None,
) -> Provider:
    """An agent's provider: the one it names, or its fallback chain (ADR 0058) when it
    names several, each behind a circuit breaker of its own settings."""
    if len(members) == 1:
        return make_provider(members[0].name, members[0].config, env)
    built: list[tuple[Provider, CircuitBreaker]] = []
    for member in members:
        config = member.config
        settings = (
            BreakerSettings()
            if isinstance(config, OfflineSpec)
            else BreakerSettings(config.breaker_failures, config.breaker_open_secs)
        )
        built.append(
            (make_provider(member.name, config, env), CircuitBreaker(member.name, settings))
        )
    chain = ProviderChain(built)
    if on_health is not None:
        chain.on_health = on_health
    return chain


NETWORK_KINDS = frozenset({"openai", "anthropic"})


def preload_providers(kinds: Iterable[str]) -> None:
    """Import, and warm, what providers of these kinds (`openai`, `anthropic`, `offline`)
    load on first use, so processes forked after this share it (the zygote, ADR 0036).
    Opens no socket and starts no thread."""
    wanted = set(kinds)
    if wanted & NETWORK_KINDS:
        from . import _anthropic, _openai
        from ._http import warm_http

        del _anthropic, _openai  # imported for their side effect: loaded before the fork
        warm_http()


__all__ = [
    "CONTEXT_PREAMBLE",
    "FAILOVER_KINDS",
    "FAILURE_KINDS",
    "GRAMMAR_HELP",
    "GRAMMAR_TOOLS",
    "SUMMARY_INSTRUCTIONS",
    "SUMMARY_REQUEST",
    "AnthropicSpec",
    "BreakerSettings",
    "CircuitBreaker",
    "Conversation",
    "FailureKind",
    "HistoryTurn",
    "NamedProvider",
    "OfflineProvider",
    "OfflineSpec",
    "OnDelta",
    "OnHealth",
    "OpenAISpec",
    "Provider",
    "ProviderChain",
    "ProviderError",
    "ProviderSpec",
    "Recalled",
    "Recap",
    "Round",
    "Step",
    "Summarised",
    "ToolCall",
    "ToolOutcome",
    "ToolSpec",
    "estimate_usage",
    "first_step",
    "grammar_help",
    "make_chain",
    "make_provider",
    "memory_key",
    "parse",
    "parse_summary",
    "preload_providers",
    "render_context",
    "reply",
]
