"""One trio task owns each ZeroMQ socket.

ZeroMQ's FD is edge-triggered: it signals that *something* changed, not that a message is
there, and reading EVENTS can consume the edge. So the owner loop is:

    drain recv with NOBLOCK until zmq.Again (or the consumer is full)
    flush queued sends with NOBLOCK until zmq.Again or empty
    re-read EVENTS; if it still says readable/writable for work we have, loop again
    only then wait on the FD — or on a wake-up from another task that queued work

Other tasks never touch the socket: they append to the outbox (`send_nowait` / `send`) or
take from the inbox, and ring the owner's doorbell. The owner's idle wait is on a private
epoll set holding the socket's FD and a doorbell eventfd, so a wake-up from another task
is one eventfd write instead of a cancellation (an exception unwinding through trio, about
20 µs on the latency path of every message an agent sends). A send that hits
EAGAIN (the peer's pipe is full) is parked per destination, so one slow peer never blocks
the others (ROUTER_MANDATORY makes EAGAIN per peer instead of a silent drop).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
from collections import deque
from collections.abc import Callable

import trio
import trio.lowlevel
import zmq

log = logging.getLogger("zeroclaw.bus")

Frames = list[bytes]
# Called by the owner for each received message with the connection's authenticated
# User-Id (b"" without one); return False when the consumer cannot take more right now
# (the owner stops reading until `wake()` is called).
Receiver = Callable[[Frames, bytes], bool]
# Called when a parked send is finally given up (destination gone or its queue overflowed).
DropHandler = Callable[[Frames, str], None]

# Plain ints: `int & zmq.POLLIN` goes through enum.Flag and costs microseconds per check.
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_POLLOUT = int(zmq.POLLOUT)
_NOBLOCK = int(zmq.NOBLOCK)
_NOBLOCK_MORE = int(zmq.NOBLOCK) | int(zmq.SNDMORE)
# The backend's `send`, called with the socket: pyzmq's `send_multipart` (and the `send`
# wrapper above it) cost ~6 µs per two-part message in Python (an enum.Flag `|` per part,
# keyword handling); this costs ~1 µs (ADR 0037). A copying send of bytes, as before.
_send_part: Callable[[zmq.Socket[bytes], bytes, int], object] = zmq.backend.Socket.send

RETRY_PARKED_SECS = 0.05  # safety net while sends are parked on a full peer
YIELD_EVERY = 16  # consecutive busy passes between checkpoints


class SocketOwner:
    def __init__(
        self,
        sock: zmq.Socket[bytes],
        on_receive: Receiver,
        *,
        name: str,
        park_per_destination: bool = False,
        max_parked: int = 10_000,
        on_drop: DropHandler | None = None,
        max_outbox: int = 50_000,
        after_drain: Callable[[], None] | None = None,
        with_user_id: bool = False,
        request_reply: bool = False,
    ) -> None:
        self.sock = sock
        self.name = name
        self._on_receive = on_receive
        self._outbox: deque[Frames] = deque()
        self._parked: dict[bytes, deque[Frames]] = {}
        self._park = park_per_destination
        self._max_parked = max_parked
        self._on_drop = on_drop
        self._after_drain = after_drain
        self._with_user = with_user_id
        # A REP socket must answer before it may receive again.
        self._request_reply = request_reply
        self._max_outbox = max_outbox
        self._idle = False
        self._rung = False
        self._bell = -1  # the doorbell eventfd, while `run` runs
        self._reading = True
        self._space = trio.Event()
        self.closed = False

    # --- called from any task --------------------------------------------------------------

    def send_nowait(self, frames: Frames) -> None:
        """Queue a message; never blocks (callers that may flood use `send`)."""
        if self.closed:
            raise trio.ClosedResourceError(f"{self.name} is closed")
        self._outbox.append(frames)
        self.wake()

    async def send(self, frames: Frames) -> None:
        """Queue a message, waiting while the outbox is over its limit (backpressure)."""
        while len(self._outbox) >= self._max_outbox:
            await self._space.wait()
        self.send_nowait(frames)

    def wake(self) -> None:
        """Make the owner re-check its work now (new sends, or the consumer has room again)."""
        if not self._request_reply:
            self._reading = True
        if self._idle and not self._rung:
            self._rung = True
            os.eventfd_write(self._bell, 1)

    def parked(self) -> int:
        return sum(len(q) for q in self._parked.values())

    def drop_parked(self, destination: bytes, reason: str) -> None:
        """Give up everything parked for a destination (it went away)."""
        queue = self._parked.pop(destination, None)
        if queue and self._on_drop:
            for frames in queue:
                self._on_drop(frames, reason)

    # --- the owner task ----------------------------------------------------------------------

    async def run(self) -> None:
        sock = self.sock
        self._bell = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        waitset = select.epoll()
        waitset.register(int(sock.getsockopt(zmq.FD)), select.EPOLLIN)
        waitset.register(self._bell, select.EPOLLIN)
        fd = waitset.fileno()
        try:
            streak = 0
            events = int(sock.getsockopt(_EVENTS))
            while True:
                # Only read when EVENTS says a message is there: an empty NOBLOCK recv costs
                # a raised zmq.Again, twice the price of asking.
                if self._reading and events & _POLLIN:
                    got = self._drain_receive()
                    if got and self._after_drain is not None:
                        self._after_drain()  # e.g. one batched Ack for the whole burst
                if self._outbox or self._parked:
                    self._flush_sends()
                events = int(sock.getsockopt(_EVENTS))
                ready = (events & _POLLIN and self._reading) or (events & _POLLOUT and self._outbox)
                if ready:
                    # Yield during long bursts so other tasks run, but not after every
                    # pass: a lone message should not pay an extra scheduler round.
                    streak += 1
                    if streak % YIELD_EVERY == 0:
                        await trio.lowlevel.checkpoint()
                    continue
                streak = 0
                # Nothing to do: wait for the socket FD's edge or the doorbell. Nothing
                # touches the socket between the EVENTS check and this wait, so an edge
                # that comes in between leaves the FD readable and ends the wait at once.
                self._idle = True
                try:
                    if self._parked:
                        with trio.move_on_after(RETRY_PARKED_SECS):
                            await trio.lowlevel.wait_readable(fd)
                    else:
                        await trio.lowlevel.wait_readable(fd)
                finally:
                    self._idle = False
                if self._rung:
                    self._rung = False
                    with contextlib.suppress(BlockingIOError):
                        os.eventfd_read(self._bell)
                events = int(sock.getsockopt(_EVENTS))
        finally:
            self.closed = True
            self._idle = False
            waitset.close()
            os.close(self._bell)
            self._bell = -1
            with contextlib.suppress(zmq.ZMQError):
                sock.close(linger=0)

    def _drain_receive(self) -> bool:
        """Receive until the socket is empty; returns whether anything was received.

        After the first message EVENTS is asked whether another waits: a lone message (the
        latency case) then costs no raised zmq.Again; a burst ends on Again as usual.
        """
        got = False
        sock = self.sock
        while self._reading:
            try:
                # Uncopied frames: `more` without a RCVMORE query, and the User-Id the ZAP
                # handler attached to the message; their bytes are copied out once.
                part = sock.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            user = part.get("User-Id") if self._with_user else None
            frames = [part.bytes]
            while part.more:  # the rest of a message is there as soon as its first part is
                part = sock.recv(zmq.NOBLOCK, copy=False)
                frames.append(part.bytes)
            ok = self._on_receive(frames, str(user).encode() if user else b"")
            if not ok or self._request_reply:
                self._reading = False  # consumer full, or a REP socket owes its reply first
            if not got:
                got = True
                if not int(sock.getsockopt(_EVENTS)) & _POLLIN:
                    break
        return got

    def _flush_sends(self) -> bool:
        """Send queued messages until Again or empty; returns whether anything was sent."""
        sent = False
        send = self._send_frames
        if self._parked:
            sent |= self._retry_parked()
        outbox = self._outbox
        while outbox:
            frames = outbox[0]
            if self._park and frames[0] in self._parked:
                outbox.popleft()  # keep per-destination order behind what is parked
                self._park_frames(frames)
                continue
            try:
                send(frames)
            except zmq.Again:
                if not self._park:
                    break
                outbox.popleft()
                self._park_frames(frames)
                continue
            except zmq.ZMQError as exc:
                outbox.popleft()
                if self._on_drop:
                    self._on_drop(frames, str(exc))
                continue
            outbox.popleft()
            sent = True
            if self._request_reply:
                self._reading = True
        if len(outbox) < self._max_outbox and not self._space.is_set():
            self._space.set()
            self._space = trio.Event()
        return sent

    def _park_frames(self, frames: Frames) -> None:
        queue = self._parked.setdefault(frames[0], deque())
        if len(queue) >= self._max_parked:
            if self._on_drop:
                self._on_drop(frames, "destination queue full")
            return
        queue.append(frames)

    def _send_frames(self, frames: Frames) -> None:
        """Send one message without blocking. Only the first part can fail (EAGAIN when the
        peer's pipe is full, EHOSTUNREACH for an unknown ROUTER peer); once it is taken,
        libzmq takes the rest of the message, as `send_multipart` relies on too."""
        sock = self.sock
        if len(frames) == 2:  # a ROUTER's [routing id, payload]: the hot path
            _send_part(sock, frames[0], _NOBLOCK_MORE)
            _send_part(sock, frames[1], _NOBLOCK)
            return
        last = len(frames) - 1
        for i, part in enumerate(frames):
            _send_part(sock, part, _NOBLOCK if i == last else _NOBLOCK_MORE)

    def _retry_parked(self) -> bool:
        sent = False
        send = self._send_frames
        for destination in list(self._parked):
            queue = self._parked[destination]
            while queue:
                try:
                    send(queue[0])
                except zmq.Again:
                    break
                except zmq.ZMQError as exc:
                    if self._on_drop:
                        self._on_drop(queue[0], str(exc))
                queue.popleft()
                sent = True
            if not queue:
                del self._parked[destination]
        return sent
