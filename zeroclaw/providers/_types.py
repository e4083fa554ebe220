"""What a provider sees and returns, whatever speaks behind it. Pure data."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolSpec:
    """A tool as a model is told about it: its name, what it does, its arguments' JSON
    schema. The toolset a turn runs with gives these; each provider renders them."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    name: str
    args: dict[str, Any]
    id: str = ""  # the provider's id for this call, echoed with its result


@dataclass(frozen=True)
class Step:
    """What the provider wants next: tool calls to run, or the final text.

    `streamed` says the text already went out as deltas while it arrived.
    """

    tool_calls: tuple[ToolCall, ...] = ()
    text: str | None = None
    streamed: bool = False


@dataclass(frozen=True)
class ToolOutcome:
    call: ToolCall
    ok: bool
    output: str = ""
    error_code: str | None = None
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def as_text(self) -> str:
        """The result as a model reads it."""
        if self.ok:
            return self.output or "(done)"
        return f"refused: {self.error_code}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class HistoryTurn:
    role: str  # "user" | "assistant"
    content: str


@dataclass(frozen=True)
class Round:
    """One provider step that asked for tools, and what the tools answered."""

    step: Step
    outcomes: tuple[ToolOutcome, ...]


@dataclass
class Conversation:
    alias: str
    system: str  # the identity files
    history: tuple[HistoryTurn, ...]  # earlier turns of this session, oldest first
    user: str  # this turn's message
    rounds: list[Round] = field(default_factory=list)
    tools: tuple[ToolSpec, ...] = ()  # what this turn may call, as the model is told


OnDelta = Callable[[str], Awaitable[None]]


class Provider(Protocol):
    name: str

    async def complete(self, conversation: Conversation, on_delta: OnDelta) -> Step:
        """The next step of this turn. Raises ProviderError with the provider and the cause."""
        ...

    async def aclose(self) -> None: ...


class ProviderError(Exception):
    """A model request failed; the message names the provider and the cause."""

    def __init__(self, provider: str, cause: str) -> None:
        super().__init__(f"provider {provider}: {cause}")
        self.provider = provider
        self.cause = cause
