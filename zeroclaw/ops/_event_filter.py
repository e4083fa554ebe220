"""What `zeroclaw events` shows: which of the daemon's events match the operator's filter,
and how one reads as a line of text. Pure: the daemon's follow handler and the CLI share it.

The kinds are the tags of the `events.Event` union, read from it at import: a kind another
change adds to the union is known here (to `--kind` and its error) without an edit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

import msgspec

from ..events import (
    AgentExited,
    AgentTransition,
    ApprovalRequested,
    ApprovalResolved,
    BudgetExceeded,
    DiscoveryCompleted,
    Event,
    InvocationFinished,
    McpSchemaChanged,
    McpServerChanged,
    McpToolTrusted,
    MemoryOperation,
    ProviderBreakerChanged,
    Published,
    RegistrationDecided,
    ReloadApplied,
    RouteRefused,
    TurnFinished,
    TurnSpent,
)

# The fields that name an agent in some event kind. A new kind that names its agent in a
# field of one of these names is matched by `--agent` without an edit here.
AGENT_FIELDS = ("alias", "agent", "agent_id", "sender", "to", "added", "removed", "changed")


def _tag(cls: type[Any]) -> str:
    return str(cls.__struct_config__.tag)


EVENT_TYPES: tuple[type[Any], ...] = get_args(Event)
EVENT_KINDS: tuple[str, ...] = tuple(sorted(_tag(t) for t in EVENT_TYPES))
# What `--kind` accepts: every tag, and the part before its dot (`agent` for
# `agent.transition`), which selects the whole family.
KIND_NAMES: tuple[str, ...] = tuple(
    sorted({*EVENT_KINDS, *(k.split(".", 1)[0] for k in EVENT_KINDS if "." in k)})
)


def event_kind(event: Event) -> str:
    return _tag(type(event))


def unknown_kinds(kinds: Iterable[str]) -> list[str]:
    """The requested kinds no event has (a typo, or a kind of a newer daemon), in order."""
    return [k for k in kinds if k not in KIND_NAMES]


def kind_matches(kind: str, wanted: str) -> bool:
    """`wanted` is the kind itself or its family (the part before the dot)."""
    return kind == wanted or kind.split(".", 1)[0] == wanted


def event_agents(event: Event) -> frozenset[str]:
    """Every agent the event names, in any of AGENT_FIELDS (a string or a tuple of them)."""
    names: set[str] = set()
    for field in AGENT_FIELDS:
        value = getattr(event, field, None)
        if isinstance(value, str):
            names.add(value)
        elif isinstance(value, tuple):
            names.update(v for v in value if isinstance(v, str))
    names.discard("")
    return frozenset(names)


@dataclass(frozen=True)
class EventFilter:
    """Events about any of `agents` and of any of `kinds`; an empty set does not filter."""

    agents: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()

    @classmethod
    def of(cls, agents: Iterable[str] = (), kinds: Iterable[str] = ()) -> EventFilter:
        return cls(frozenset(agents), frozenset(kinds))

    def matches(self, event: Event) -> bool:
        if self.kinds:
            kind = event_kind(event)
            if not any(kind_matches(kind, wanted) for wanted in self.kinds):
                return False
        return not self.agents or not self.agents.isdisjoint(event_agents(event))

    def select(self, items: Iterable[Published], limit: int | None = None) -> list[Published]:
        """The matching items, the newest `limit` of them when given, oldest first."""
        found = [p for p in items if self.matches(p.event)]
        if limit is None:
            return found
        return found[-limit:] if limit > 0 else []


# --- one event as a line ---------------------------------------------------------------------


def describe(event: Event) -> str:
    """The event's fields in words, e.g. `alpha running -> backoff (killed by signal 9)`."""
    if isinstance(event, AgentTransition):
        text = f"{event.alias} {event.from_state} -> {event.to_state}"
        return f"{text} ({event.reason})" if event.reason else text
    if isinstance(event, RouteRefused):
        text = f"{event.sender} -> {event.to} refused: {event.code}"
        if event.channel:
            text += f" on {event.channel}"
        return f"{text} ({event.detail})" if event.detail else text
    if isinstance(event, ReloadApplied):
        parts: list[str] = [event.outcome]
        for label, names in (
            ("added", event.added),
            ("removed", event.removed),
            ("changed", event.changed),
        ):
            if names:
                parts.append(f"{label} {', '.join(names)}")
        if event.errors:
            parts.append(f"errors: {'; '.join(event.errors)}")
        return ", ".join(parts)
    if isinstance(event, MemoryOperation):
        outcome = "ok" if event.ok else f"failed: {event.code or 'error'}"
        return f"{event.agent} {event.op} {outcome}"
    if isinstance(event, AgentExited):
        return f"{event.alias} exited ({event.cause})" + (f": {event.exit}" if event.exit else "")
    if isinstance(event, TurnFinished):
        return (
            f"{event.agent} turn on {event.channel or 'cli'}: {event.outcome} "
            f"in {event.duration_secs:.3g}s"
        )
    if isinstance(event, InvocationFinished):
        return f"{event.agent_id} {event.state}" + (f": {event.code}" if event.code else "")
    if isinstance(event, DiscoveryCompleted):
        text = (
            f"{event.found} found: {event.registered} registered, {event.rejected} rejected, "
            f"{event.display_only} shown only, {event.shadowed} shadowed"
        )
        for label, keys in (
            ("added", event.added),
            ("removed", event.removed),
            ("kept last good", event.kept_last_good),
            ("degraded", event.degraded),
            ("timed out", event.timed_out),
        ):
            if keys:
                text += f"; {label} {', '.join(keys)}"
        return text
    if isinstance(event, ApprovalRequested):
        return (
            f"{event.agent} approval {event.id} for {event.channel}:{event.external_sender} "
            f"waits for the operator ({event.timeout_secs:g}s): {event.what}"
        )
    if isinstance(event, ApprovalResolved):
        return f"{event.agent} approval {event.id} ({event.channel}): {event.outcome}"
    if isinstance(event, McpSchemaChanged):
        text = (
            f"{event.agent} {event.server}/{event.tool} changed its schema "
            f"({event.trusted_digest[:12]} -> {event.digest[:12]}"
        )
        if event.read_only != event.trusted_read_only:
            text += f", read-only {str(event.trusted_read_only).lower()} -> "
            text += str(event.read_only).lower()
        return f"{text}): withheld until 'zeroclaw mcp trust {event.server}'"
    if isinstance(event, McpToolTrusted):
        return f"{event.agent} {event.server}/{event.tool} trusted at {event.digest[:12]}"
    if isinstance(event, McpServerChanged):
        text = f"{event.agent} {event.server} {event.status}"
        if event.restarts:
            text += f" (restarts {event.restarts})"
        return f"{text}: {event.detail}" if event.detail else text
    if isinstance(event, TurnSpent):
        tokens = (
            event.input_tokens
            + event.output_tokens
            + event.cached_input_tokens
            + event.cache_write_tokens
        )
        text = (
            f"{event.agent} turn from {event.origin}: {event.steps} step(s), {tokens} tokens "
            f"({event.cached_input_tokens} cached), cost {event.cost}"
        )
        if event.providers:
            text += f", answered by {', '.join(event.providers)}"
        if event.failed:
            text += f" after {', '.join(event.failed)} failed"
        if event.estimated:
            text += " (estimated)"
        return text + (", stopped by its budget" if event.stopped else "")
    if isinstance(event, BudgetExceeded):
        what = "refused a turn" if event.at == "start" else "ended a turn after its step"
        return f"{event.agent} {what} from {event.origin}: {event.detail}"
    if isinstance(event, ProviderBreakerChanged):
        text = f"{event.agent} {event.provider} {event.state}"
        if event.failures:
            text += f" after {event.failures} failure(s)"
        return f"{text}: {event.last_error}" if event.last_error else text
    if isinstance(event, RegistrationDecided):
        text = f"{event.key} {event.action} ({event.reason})"
        return f"{text}, shadowed by {event.shadowed_by}" if event.shadowed_by else text
    return _generic(event)


def _generic(event: Any) -> str:
    """A kind this module has no words for: its fields as `name=value`."""
    fields = msgspec.structs.asdict(event)
    return " ".join(f"{name}={_plain(value)}" for name, value in fields.items() if value != "")


def _plain(value: Any) -> str:
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


def event_line(item: Published, *, today: datetime | None = None) -> str:
    """`12:03:04 agent.transition alpha running -> backoff (...)`: local wall-clock time
    (with the date when it is not `today`'s), the kind, the fields in words."""
    when = datetime.fromtimestamp(item.at)
    now = today if today is not None else datetime.now()
    stamp = when.strftime("%H:%M:%S" if when.date() == now.date() else "%Y-%m-%d %H:%M:%S")
    return f"{stamp} {event_kind(item.event)} {describe(item.event)}"


def event_json(item: Published) -> dict[str, object]:
    """The item as plain JSON values: `seq`, `at` (epoch seconds), `event` (with `kind`)."""
    plain: dict[str, object] = msgspec.to_builtins(item)
    return plain
