"""Model providers: `offline` (built in, deterministic), `openai`-compatible, `anthropic`.

`make_provider` builds the one an agent is configured with. Network providers import
httpx only when built, so an offline agent never loads it.
"""

from collections.abc import Mapping
from typing import Any

from ._offline import GRAMMAR_HELP, OfflineProvider, first_step, memory_key, parse, reply
from ._tools import TOOLS, bad_arguments
from ._types import (
    Conversation,
    HistoryTurn,
    OnDelta,
    Provider,
    ProviderError,
    Round,
    Step,
    ToolCall,
    ToolOutcome,
)


def make_provider(reference: str, config: Mapping[str, Any], env: Mapping[str, str]) -> Provider:
    """The provider `kind.alias` with its config table; keys come from `env` only."""
    kind, _, alias = reference.partition(".")
    if kind == "offline":
        return OfflineProvider()
    if kind == "openai":
        from ._openai import OpenAIProvider

        return OpenAIProvider(alias, config, env)
    if kind == "anthropic":
        from ._anthropic import AnthropicProvider

        return AnthropicProvider(alias, config, env)
    raise ProviderError(reference, f"unknown provider kind {kind!r}")


__all__ = [
    "GRAMMAR_HELP",
    "TOOLS",
    "Conversation",
    "HistoryTurn",
    "OfflineProvider",
    "OnDelta",
    "Provider",
    "ProviderError",
    "Round",
    "Step",
    "ToolCall",
    "ToolOutcome",
    "bad_arguments",
    "first_step",
    "make_provider",
    "memory_key",
    "parse",
    "reply",
]
