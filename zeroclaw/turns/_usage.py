"""What a turn spent, as agent and daemon say it to each other (issue 27, ADR 0057).

A provider answers each step with its token usage (`TokenUsage`, in four disjoint kinds);
the turn reports every step to the daemon's `USAGE_SERVICE` (the caller is the router's
authenticated identity, never a field here):

  op "report"     body `UsageReport`    -> `UsageVerdict`: recorded against the caller and
                                           the turn's origin; `stop` says a budget of the
                                           turn is spent, so the turn ends after this step.
                                           The last step of a turn is posted (no answer
                                           awaited), so a turn without tools waits for
                                           nothing.
  op "providers"  body `ProvidersReport` -> `Nothing`: the agent's provider chain and the
                                           state of each provider's circuit breaker, posted
                                           when one changed (for `zeroclaw status`).

Neutral: agent, providers and daemon share it (the providers fill `TokenUsage`).
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

import msgspec

from .._ops import Nothing, Operation

USAGE_SERVICE = "usage"

# One step's count of one kind: more is a bug or a lie, refused when it crosses the bus.
MAX_STEP_TOKENS = 100_000_000
StepTokens = Annotated[int, msgspec.Meta(ge=0, le=MAX_STEP_TOKENS)]
TokenKind = Literal["input", "cached_input", "cache_write", "output"]
TOKEN_KINDS: tuple[TokenKind, ...] = get_args(TokenKind)


class TokenUsage(msgspec.Struct, frozen=True, omit_defaults=True):
    """The tokens of one provider step, in disjoint kinds that add up to the total:
    `input_tokens` read at the input price (not from a cache), `cached_input_tokens` read
    from the provider's prompt cache, `cache_write_tokens` written to it (Anthropic's cache
    creation), `output_tokens` generated. `estimated`: the server reported none, so the
    turn counted characters (four to a token)."""

    input_tokens: StepTokens = 0
    output_tokens: StepTokens = 0
    cached_input_tokens: StepTokens = 0
    cache_write_tokens: StepTokens = 0
    estimated: bool = False

    @property
    def total(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cached_input_tokens
            + self.cache_write_tokens
        )

    def of(self, kind: TokenKind) -> int:
        if kind == "input":
            return self.input_tokens
        if kind == "cached_input":
            return self.cached_input_tokens
        if kind == "cache_write":
            return self.cache_write_tokens
        return self.output_tokens


class StepUsage(msgspec.Struct, frozen=True, omit_defaults=True):
    """One provider step of a turn: who answered it (`kind.alias`), what it used, and the
    providers of the chain that failed before it in this step (fell over, in order)."""

    provider: str
    tokens: TokenUsage
    failed: tuple[str, ...] = ()


class UsageReport(msgspec.Struct, frozen=True):
    """One step, reported by the agent that ran it. `turn`: the daemon's id of the turn
    (a chat's, or the router's name of a question, `asker/id`): the daemon knows its
    origin and session from when it admitted it, and takes neither from the agent."""

    turn: str
    step: StepUsage
    last: bool = False  # the turn's last step (posted: nobody waits for the verdict)
    # A session compaction's summary step (ADR 0059), asked after its turn ended: charged
    # to the agent like any step, posted, no verdict.
    compaction: bool = False


BudgetLimit = Literal["tokens_per_day", "cost_per_day", "turns_per_hour"]


class UsageVerdict(msgspec.Struct, frozen=True, omit_defaults=True):
    """The daemon's answer to a step: `stop` when a budget of the turn is spent (`limit`
    names which, `detail` whose: the agent's, or its origin's)."""

    stop: bool = False
    limit: BudgetLimit | None = None
    detail: str = ""


BreakerState = Literal["closed", "open", "half_open"]


class ProviderHealth(msgspec.Struct, frozen=True, omit_defaults=True):
    """One provider of an agent's chain as its circuit breaker sees it."""

    provider: str
    state: BreakerState = "closed"
    failures: int = 0  # consecutive failures
    retry_in_secs: float = 0.0  # open: how long until a trial call
    last_error: str = ""


class ProvidersReport(msgspec.Struct, frozen=True):
    providers: tuple[ProviderHealth, ...]


# How the usage service refuses a request (the agent reads a refusal as "go on"; the next
# turn's admission is the daemon's own).
UsageErrorCode = Literal["bad_request", "internal_error"]
USAGE_ERROR_CODES: tuple[str, ...] = get_args(UsageErrorCode)

USAGE_REPORT = Operation(USAGE_SERVICE, "report", UsageReport, UsageVerdict, USAGE_ERROR_CODES)
USAGE_PROVIDERS = Operation(USAGE_SERVICE, "providers", ProvidersReport, Nothing, USAGE_ERROR_CODES)
USAGE_OPERATIONS = (USAGE_REPORT, USAGE_PROVIDERS)
