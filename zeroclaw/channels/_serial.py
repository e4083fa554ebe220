"""A serial channel: one device (a path), one external sender `serial:<alias>`; each input
line is a message to the channel's owner, each outcome goes back as lines.

Device I/O is pyserial-asyncio's, run on a trio-asyncio loop (ADR 0026); `_Link` is the
only code that touches it. Messages are served one at a time, in the order their lines
came in, and each reply's lines are written in one locked write, so two replies never
interleave. A turn that needs approval writes a prompt line; the next input line is the
answer. The device may disappear (read error, EOF, a write that fails) and come back: the
adapter reopens its path with exponential backoff and serves on.
"""

from __future__ import annotations

import logging
from typing import Any

import serial
import serial_asyncio
import trio
import trio_asyncio

from ..config import SerialChannel
from ._adapter import ChannelStartFailed
from ._host import ChannelHost
from ._lines import (
    Dropped,
    LineFramer,
    approval_answer,
    approval_prompt,
    encode_lines,
    error_line,
    outcome_lines,
)
from ._types import Inbound, Scheduled

log = logging.getLogger("zeroclaw.channels.serial")

READ_CHUNK = 4096
QUEUE_LINES = 64  # lines waiting for their turn; more are refused with an error line
BACKOFF_FIRST = 0.1
BACKOFF_CAP = 5.0

# What a device that went away raises (pyserial's own, or the OS's).
DEVICE_ERRORS: tuple[type[BaseException], ...] = (OSError, serial.SerialException, EOFError)


class _Link:
    """One open device: pyserial-asyncio's stream pair, called across the bridge."""

    def __init__(self, reader: Any, writer: Any) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, path: str, baud: int) -> _Link:
        reader, writer = await trio_asyncio.aio_as_trio(serial_asyncio.open_serial_connection)(
            url=path,
            baudrate=baud,
            exclusive=True,  # flock: a second reader would steal lines
        )
        return cls(reader, writer)

    async def read(self) -> bytes:
        data: bytes = await trio_asyncio.aio_as_trio(self._reader.read)(READ_CHUNK)
        if not data:
            raise EOFError("the device closed")
        return data

    async def write(self, data: bytes) -> None:
        if self._writer.transport.is_closing():
            raise EOFError("the device closed")
        self._writer.write(data)
        await trio_asyncio.aio_as_trio(self._writer.drain)()

    def close(self) -> None:
        self._writer.close()


class SerialAdapter:
    """The channel `serial.<alias>` on `config.port`. `serve` raises ChannelStartFailed when
    the first open fails (the daemon reports it and retries the adapter); after a start,
    the adapter itself reopens a device that went away, forever, with backoff."""

    def __init__(
        self,
        alias: str,
        config: SerialChannel,
        *,
        backoff_first: float = BACKOFF_FIRST,
        backoff_cap: float = BACKOFF_CAP,
    ) -> None:
        self.alias = alias
        self.config = config
        self.key = f"serial.{alias}"
        self.sender = f"serial:{alias}"
        self._backoff = (backoff_first, backoff_cap)
        self._write_lock = trio.Lock()  # one reply's (or prompt's) lines at a time
        self._ask_lock = trio.Lock()  # one prompt waits at a time
        self._answer: trio.MemorySendChannel[str] | None = None  # set while a prompt waits
        self._link: _Link | None = None
        self.connected = False  # for status: is the device open now
        self.opened = 0  # how many times the device was opened (1 + reconnects)
        self.failed_opens = 0  # reopen attempts that failed since the device was lost
        self.dropped_lines = 0
        self._changed = trio.Event()  # set (and replaced) at each open and loss

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.key,)

    async def wait_open(self, times: int = 1) -> None:
        """Until the device is open and was opened at least `times` times (for tests and
        status: a reconnect shows as `opened` going up)."""
        while not (self.connected and self.opened >= times):
            await self._changed.wait()

    async def wait_lost(self, failed_opens: int = 0) -> None:
        """Until the device is lost and at least `failed_opens` reopens failed since."""
        while self.connected or self.failed_opens < failed_opens:
            await self._changed.wait()

    def _set_connected(self, connected: bool) -> None:
        self.connected = connected
        self.opened += connected
        self.failed_opens = 0
        self._changed_now()

    def _changed_now(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def serve(
        self, host: ChannelHost, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with trio_asyncio.open_loop():
            try:
                link = await _Link.open(self.config.port, self.config.baud)
            except DEVICE_ERRORS as exc:
                failed = exc  # raised outside the loop: its nursery would wrap it in a group
            else:
                log.info("%s: device %s open", self.key, self.config.port)
                task_status.started()
                while True:
                    await self._session(host, link)
                    link = await self._reopen()
        raise ChannelStartFailed(f"{self.key}: cannot open {self.config.port}: {failed}")

    async def _reopen(self) -> _Link:
        delay, cap = self._backoff
        log.warning("%s: waiting for device %s", self.key, self.config.port)
        while True:
            await trio.sleep(delay)
            try:
                link = await _Link.open(self.config.port, self.config.baud)
            except DEVICE_ERRORS:
                self.failed_opens += 1
                self._changed_now()
                delay = min(delay * 2, cap)
                continue
            log.info("%s: device %s back", self.key, self.config.port)
            return link

    async def _session(self, host: ChannelHost, link: _Link) -> None:
        """Serve one open device until it goes away; what was in flight is dropped with it
        (its reply has nowhere to go)."""
        self._link = link
        self._set_connected(True)
        framer = LineFramer(self.config.max_line_bytes, self.config.encoding)
        lines_in, lines_out = trio.open_memory_channel[str](QUEUE_LINES)
        try:
            async with trio.open_nursery() as nursery:

                async def until_lost(fn: Any, *args: Any) -> None:
                    try:
                        await fn(*args)
                    except DEVICE_ERRORS as exc:
                        log.warning("%s: device %s lost: %s", self.key, self.config.port, exc)
                        nursery.cancel_scope.cancel()

                nursery.start_soon(until_lost, self._read_lines, link, framer, lines_in)
                nursery.start_soon(until_lost, self._converse_each, host, lines_out)
        finally:
            self._link, self._answer = None, None
            self._set_connected(False)
            link.close()

    async def _read_lines(
        self, link: _Link, framer: LineFramer, queue: trio.MemorySendChannel[str]
    ) -> None:
        while True:
            for framed in framer.feed(await link.read()):
                if isinstance(framed, Dropped):
                    self.dropped_lines += 1
                    log.warning("%s: %s", self.key, framed.detail)
                    await self._write([error_line("too_large", framed.detail)])
                elif self._answer is not None:
                    answer, self._answer = self._answer, None  # one line answers one prompt
                    answer.send_nowait(framed)
                else:
                    try:
                        queue.send_nowait(framed)
                    except trio.WouldBlock:
                        detail = f"over {QUEUE_LINES} lines wait; this one is dropped"
                        await self._write([error_line("unavailable", detail)])

    async def _converse_each(
        self, host: ChannelHost, queue: trio.MemoryReceiveChannel[str]
    ) -> None:
        async for text in queue:
            outcome = await host.converse(Inbound(self.key, self.sender, text), ask=self._ask)
            await self._write(outcome_lines(outcome))

    async def push(self, key: str, scheduled: Scheduled) -> str | None:
        """A scheduled run's outcome as lines, each led by `[<agent>.<name>]`, written in
        one locked write like a reply."""
        lines = [f"[{scheduled.schedule}] {line}" for line in outcome_lines(scheduled.outcome)]
        try:
            await self._write(lines)
        except DEVICE_ERRORS as exc:
            return f"{self.key}: device {self.config.port} not open ({exc})"
        return None

    async def _ask(self, rid: str, what: str) -> bool:
        """The prompt line; the next input line answers it. The host's approval timeout
        cancels the wait (a no), and a line after that is a new message again."""
        async with self._ask_lock:
            answer_in, answer_out = trio.open_memory_channel[str](1)
            self._answer = answer_in
            try:
                await self._write([approval_prompt(rid, what)])
                return approval_answer(await answer_out.receive())
            except DEVICE_ERRORS:
                return False  # the device went away: nobody can say yes
            finally:
                self._answer = None

    async def _write(self, lines: list[str]) -> None:
        link = self._link
        if link is None:
            raise EOFError("the device is not open")
        data = encode_lines(lines, self.config.newline, self.config.encoding)
        async with self._write_lock:
            await link.write(data)
