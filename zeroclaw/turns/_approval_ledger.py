"""The approvals the daemon itself saw given, for the daemon services that act on them.

An agent relays its turn's approval questions to the daemon (`TURN_APPROVE`); whoever
answers (the operator's CLI, the operator queue, a trusted sender) answers the daemon's turn
service, not the agent. When the answer is yes, the turn service records it here: this turn
of this agent may now do exactly what the question said, once. A daemon service that runs
something on an agent's behalf (an adapter's program) takes that yes from here instead of
believing an `approved` flag the agent would set itself (ADR 0052).

Pure: the turn service records and forgets, the services take; bounded per turn (an agent
decides when its turn ends, and a yes may come from its own accomplice: a channel whose
`approvals` is "sender").
"""

from __future__ import annotations

from collections import Counter

# Distinct questions a turn's record keeps; beyond it the oldest is forgotten. A service
# takes its yes as soon as it is given (the tool asks, then calls), so only a turn that is
# given yes after yes to questions nobody acts on ever reaches it.
MAX_APPROVALS_PER_TURN = 64


class ApprovalLedger:
    """Yes answers not used yet, per (agent, turn), by the question's exact text."""

    def __init__(self) -> None:
        self._given: dict[tuple[str, str], Counter[str]] = {}

    def record(self, agent: str, turn: str, what: str) -> None:
        """Whoever answers `turn`'s approvals said yes to `what` (as it was shown)."""
        given = self._given.setdefault((agent, turn), Counter())
        if what not in given and len(given) >= MAX_APPROVALS_PER_TURN:
            del given[next(iter(given))]
        given[what] += 1

    def take(self, agent: str, turn: str | None, what: str) -> bool:
        """Use one yes to `what` given in `agent`'s `turn`; False when there is none (never
        asked, denied, used already, or the turn has ended)."""
        if turn is None:
            return False
        given = self._given.get((agent, turn))
        if given is None or given[what] <= 0:
            return False
        given[what] -= 1
        if given[what] == 0:
            del given[what]
        if not given:
            del self._given[(agent, turn)]
        return True

    def forget(self, agent: str, turn: str) -> None:
        """The turn ended: what it was allowed ends with it."""
        self._given.pop((agent, turn), None)

    def __len__(self) -> int:
        return sum(sum(given.values()) for given in self._given.values())
