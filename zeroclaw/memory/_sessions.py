"""The operator's view of stored sessions (`zeroclaw sessions list|show`): every session
of every origin, with the origin its key belongs to. Through the daemon's control command
or, with no daemon, straight on the store: the same two functions."""

from __future__ import annotations

from collections.abc import Iterable

from ..control import SessionInfo, SessionReply, SessionsReply, TranscriptTurn
from ._context import memory_summary
from ._errors import MemoryServiceError
from ._records import SessionSummary
from ._service import MemoryService
from ._store import OperatorScope, Scope


def _info(agent: str, summary: SessionSummary) -> SessionInfo:
    # Loaded here, not at import: `memory` commands through the daemon never need the bus.
    from ..bus import session_owner

    owner = session_owner(summary.session)
    return SessionInfo(
        agent, summary.session, owner.kind, owner.who, owner.name, summary.turns, summary.last_at
    )


def _check(agent: str, known: frozenset[str]) -> None:
    if agent not in known:
        raise MemoryServiceError(
            "unknown_agent", f"no agent {agent!r}; known: {', '.join(sorted(known)) or 'none'}"
        )


async def list_sessions(
    service: MemoryService, known: frozenset[str], agent: str | None = None
) -> SessionsReply:
    """Every session of `agent` (of every known agent if None), by agent then key."""
    agents: Iterable[str] = sorted(known)
    if agent is not None:
        _check(agent, known)
        agents = [agent]
    out: list[SessionInfo] = []
    for alias in agents:
        summaries = await service.read(service.store.sessions, OperatorScope(), alias)
        out.extend(_info(alias, s) for s in summaries)
    return SessionsReply(out)


async def show_session(
    service: MemoryService, known: frozenset[str], agent: str, session: str, limit: int = 200
) -> SessionReply:
    """The last `limit` turns of one session (its stored key), oldest first."""
    _check(agent, known)
    if not 1 <= limit <= 10_000:
        raise MemoryServiceError("bad_request", "limit is 1..10000")
    summaries = await service.read(service.store.sessions, OperatorScope(), agent)
    summary = next((s for s in summaries if s.session == session), None)
    if summary is None:
        raise MemoryServiceError(
            "session_not_found",
            f"agent {agent!r} has no session {session!r}; see `zeroclaw sessions list`",
        )
    turns = await service.read(service.store.session, Scope(agent), session, limit=limit)
    digest = await service.read(service.store.digest, Scope(agent), session)
    return SessionReply(
        _info(agent, summary),
        [TranscriptTurn(t.role, t.content, t.at) for t in turns],
        None if digest is None else memory_summary(digest),
    )
