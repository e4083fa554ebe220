"""Model providers: `offline` (built in, deterministic), `openai`-compatible, `anthropic`.

`make_provider` builds the one an agent is configured with. Network providers import
httpx only when built, so an offline agent never loads it. Providers know tools only as
the `ToolSpec`s a turn's conversation carries (its toolset), never a global list.
"""

from collections.abc import Iterable, Mapping

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
from ._spec import AnthropicSpec, OfflineSpec, OpenAISpec, ProviderSpec
from ._summary import SUMMARY_INSTRUCTIONS, SUMMARY_REQUEST, Summarised, parse_summary
from ._types import (
    Conversation,
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


def make_provider(reference: str, config: ProviderSpec, env: Mapping[str, str]) -> Provider:
    """The provider `kind.alias` built from its settings; keys come from `env` only."""
    _, _, alias = reference.partition(".")
    if isinstance(config, OfflineSpec):
        return OfflineProvider()
    if isinstance(config, OpenAISpec):
        from ._openai import OpenAIProvider

        return OpenAIProvider(alias, config, env)
    from ._anthropic import AnthropicProvider

    return AnthropicProvider(alias, config, env)


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
    "GRAMMAR_HELP",
    "GRAMMAR_TOOLS",
    "SUMMARY_INSTRUCTIONS",
    "SUMMARY_REQUEST",
    "AnthropicSpec",
    "Conversation",
    "HistoryTurn",
    "OfflineProvider",
    "OfflineSpec",
    "OnDelta",
    "OpenAISpec",
    "Provider",
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
    "first_step",
    "grammar_help",
    "make_provider",
    "memory_key",
    "parse",
    "parse_summary",
    "preload_providers",
    "render_context",
    "reply",
]
