"""What a provider sees and returns, whatever speaks behind it. Pure data."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

from ..turns import TokenUsage


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

    `streamed` says the text already went out as deltas while it arrived. `usage`: what
    the step used as the server reported it (None: it reported nothing); `provider`: who
    answered (`kind.alias`), and `failed` who of its chain failed before (ADR 0058).
    """

    tool_calls: tuple[ToolCall, ...] = ()
    text: str | None = None
    streamed: bool = False
    usage: TokenUsage | None = None
    provider: str = ""
    failed: tuple[str, ...] = ()


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


@dataclass(frozen=True)
class Recalled:
    """A record of some agent's memory recalled into this turn (ADR 0059): data."""

    agent: str  # whose memory it is
    key: str
    content: str
    category: str
    updated_at: float  # seconds since the epoch
    cut: bool = False  # the content was cut to the turn's recall budget


@dataclass(frozen=True)
class Recap:
    """The session's summary of its earlier turns, `first`..`through` (sequence numbers;
    `turns` of them), which compactions dropped (ADR 0059): data."""

    text: str
    first: int
    through: int
    turns: int
    at: float


@dataclass
class Conversation:
    alias: str
    system: str  # the identity files (or, for a summary, what to write)
    history: tuple[HistoryTurn, ...]  # earlier turns of this session, oldest first
    user: str  # this turn's message
    rounds: list[Round] = field(default_factory=list)
    tools: tuple[ToolSpec, ...] = ()  # what this turn may call, as the model is told
    # What the turn was given from memory (ADR 0059), rendered as data by `system_text`.
    memories: tuple[Recalled, ...] = ()
    recap: Recap | None = None
    cut: bool = False  # older turns of the session that no recap covers are left out
    # "summary": a compaction asks for a summary of `history` (and of `recap`), not a turn.
    purpose: Literal["turn", "summary"] = "turn"

    def system_text(self) -> str:
        """The system prompt as a model is sent it: `system`, then what was recalled,
        marked and escaped as data (providers/_context.py)."""
        from ._context import render_context  # beside its escaping rules

        context = render_context(self.memories, self.recap, self.cut)
        return "\n\n".join(part for part in (self.system, context) if part)


OnDelta = Callable[[str], Awaitable[None]]


class Provider(Protocol):
    name: str

    async def complete(self, conversation: Conversation, on_delta: OnDelta) -> Step:
        """The next step of this turn. Raises ProviderError with the provider and the cause."""
        ...

    async def aclose(self) -> None: ...


# How a model request failed. The first four are the provider's passing trouble, on which a
# fallback chain asks the next provider (ADR 0058); the others would fail the same anywhere
# (a request the server refuses, an answer nobody can read, a provider that cannot start).
FailureKind = Literal[
    "connect",  # the server could not be reached (refused, reset, DNS, TLS)
    "timeout",  # no bytes in timeout_secs, no whole answer in answer_timeout_secs, HTTP 408
    "rate_limited",  # HTTP 429
    "server",  # HTTP 5xx (529 included), or an error the server sent inside its stream
    "refused",  # any other HTTP 4xx: the request itself is wrong (a model name, a key)
    "malformed",  # an answer that is not the protocol
    "setup",  # the provider cannot be built (its key's variable is not set)
]
FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)
FAILOVER_KINDS: frozenset[FailureKind] = frozenset({"connect", "timeout", "rate_limited", "server"})


class ProviderError(Exception):
    """A model request failed; the message names the provider and the cause, `kind` how."""

    def __init__(
        self, provider: str, cause: str, kind: FailureKind = "malformed", status: int | None = None
    ) -> None:
        super().__init__(f"provider {provider}: {cause}")
        self.provider = provider
        self.cause = cause
        self.kind: FailureKind = kind
        self.status = status  # the HTTP status, when the server answered with one

    @property
    def fails_over(self) -> bool:
        """The provider's passing trouble: the next provider of a chain may answer."""
        return self.kind in FAILOVER_KINDS


def status_failure(status: int) -> FailureKind:
    """What an HTTP error status says about the provider. Pure."""
    if status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server"
    return "refused"
