"""Which control connections the daemon serves when there are too many (ADR 0011). Sans-IO:
the control server reports events (connect, request started or finished, close) and acts on
the decisions; nothing here touches a socket or a clock.

- Every peer process may hold `per_peer` connections. The peer is the pid: every local
  client runs as the daemon's uid, so a uid bound would lock the operator out with the
  rest; a pid bound stops one runaway or hostile process from taking every slot, and the
  bounds below handle many processes.
- `capacity` general connections. When they are full, a new one takes the place of the
  oldest idle one, which is closed ("reaped"). Idle: no request running and no chat
  session. A connection that has started a chat is a session someone is typing into: it is
  never reaped and has no idle timeout.
- `reserved` more connections admitted only when nothing can be reaped; they may send only
  operator essentials (`status`, `agents list`, `stop`) and close after one answer, so a
  full house of busy or chatting connections still lets the operator see and stop the
  daemon.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

RequestKind = Literal["essential", "chat", "other"]


@dataclass(frozen=True)
class Admit:
    reserved: bool  # may only ask essentials, once
    reap: tuple[int, ...] = ()  # connections to close first; they are already forgotten


@dataclass(frozen=True)
class Refuse:
    reason: str


@dataclass
class _Conn:
    peer: int
    reserved: bool
    last_active: float
    busy: bool = False
    chat: bool = False
    served: int = 0

    @property
    def idle(self) -> bool:
        return not self.busy and not self.chat


@dataclass
class ConnectionTable:
    """`capacity` and `per_peer` are `[daemon] control_limits` (their defaults the same);
    `limit` changes them for the connections to come (a reload): none open is closed for
    it, the next connect makes room as it always does."""

    capacity: int = 256
    reserved: int = 4
    per_peer: int = 64
    _conns: dict[int, _Conn] = field(default_factory=dict)

    def limit(self, capacity: int, per_peer: int) -> None:
        self.capacity, self.per_peer = capacity, per_peer

    # --- events in, decisions out --------------------------------------------------------

    def connect(self, conn: int, peer: int, now: float) -> Admit | Refuse:
        if conn in self._conns:
            raise ValueError(f"connection {conn} is already open")
        mine = [c for c in self._conns if self._conns[c].peer == peer]
        if len(mine) >= self.per_peer:
            victim = self._oldest_idle(mine)
            if victim is None:
                return Refuse(f"this process already holds {self.per_peer} busy connections")
            reserved = self._conns[victim].reserved
            self._forget(victim)
            reserved = reserved and self._general() >= self.capacity
            return self._admit(conn, peer, now, reserved=reserved, reap=(victim,))
        if self._general() < self.capacity:
            return self._admit(conn, peer, now, reserved=False)
        victim = self._oldest_idle([c for c, v in self._conns.items() if not v.reserved])
        if victim is not None:
            return self._admit(conn, peer, now, reserved=False, reap=(self._forget(victim),))
        if self._in_reserve() < self.reserved:
            return self._admit(conn, peer, now, reserved=True)
        victim = self._oldest_idle([c for c, v in self._conns.items() if v.reserved])
        if victim is not None:
            return self._admit(conn, peer, now, reserved=True, reap=(self._forget(victim),))
        return Refuse("too many control connections are busy")

    def request(self, conn: int, kind: RequestKind, now: float) -> bool:
        """A request arrived; False means refuse it (`busy`) and close the connection."""
        state = self._conns[conn]
        if state.reserved and (kind != "essential" or state.served):
            return False
        state.busy = True
        state.chat = state.chat or kind == "chat"
        state.last_active = now
        return True

    def finished(self, conn: int, now: float) -> bool:
        """A request was answered; False means close the connection (a reserved one is
        done after one answer)."""
        state = self._conns[conn]
        state.busy = False
        state.served += 1
        state.last_active = now
        return not state.reserved

    def closed(self, conn: int) -> None:
        self._conns.pop(conn, None)

    # --- what the server asks ------------------------------------------------------------

    def times_out(self, conn: int) -> bool:
        """Whether an idle timeout applies: never to a chat session."""
        return not self._conns[conn].chat

    def __contains__(self, conn: int) -> bool:
        return conn in self._conns

    def __len__(self) -> int:
        return len(self._conns)

    def peer_count(self, peer: int) -> int:
        return sum(1 for c in self._conns.values() if c.peer == peer)

    def snapshot(self) -> dict[int, tuple[int, bool, bool, bool, float]]:
        """conn -> (peer, reserved, busy, chat, last_active), for tests and status."""
        return {
            k: (c.peer, c.reserved, c.busy, c.chat, c.last_active) for k, c in self._conns.items()
        }

    # --- internals -----------------------------------------------------------------------

    def _general(self) -> int:
        return sum(1 for c in self._conns.values() if not c.reserved)

    def _in_reserve(self) -> int:
        return sum(1 for c in self._conns.values() if c.reserved)

    def _oldest_idle(self, candidates: list[int]) -> int | None:
        idle = [c for c in candidates if self._conns[c].idle]
        return min(idle, key=lambda c: (self._conns[c].last_active, c), default=None)

    def _forget(self, conn: int) -> int:
        del self._conns[conn]
        return conn

    def _admit(
        self, conn: int, peer: int, now: float, *, reserved: bool, reap: tuple[int, ...] = ()
    ) -> Admit:
        self._conns[conn] = _Conn(peer, reserved, now)
        return Admit(reserved, reap)
