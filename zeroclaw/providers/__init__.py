"""Model providers. `offline` is built in and deterministic; network providers come next."""

from ._offline import (
    GRAMMAR_HELP,
    Step,
    ToolCall,
    ToolOutcome,
    first_step,
    memory_key,
    parse,
    reply,
)

__all__ = [
    "GRAMMAR_HELP",
    "Step",
    "ToolCall",
    "ToolOutcome",
    "first_step",
    "memory_key",
    "parse",
    "reply",
]
