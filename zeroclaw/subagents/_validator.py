"""Schema validation stopped at its bound: a small pool of worker processes (ADR 0046).

jsonschema is pure Python and holds the GIL: in a daemon thread, a costly check (uniqueItems
over thousands of objects is quadratic) slows every other task, and a thread cannot be
stopped, only abandoned, so abandoned checks piled up in trio's thread pool and kept the
process from exiting. Here each check runs in a worker process; when its bound passes (the
wait for a worker counts too) the worker is SIGKILLed and reaped, and the check answers
`OutOfBound`. The daemon's cost of a hostile check is a pipe write and a kill.

Checks wait in lanes: one check at a time per lane (a sub-agent's inputs from one caller,
a sub-agent's results), at most `size` at once in all. A caller that sends costly inputs
makes its own lane wait, and its checks fail at their bound; other lanes keep their pace.

Workers are started on demand and up to `keep` are kept while idle: a fresh interpreter per
check costs about half a second (measured: 0.3-0.6 s to import the validator), a warm one
answers a small check in well under a millisecond (measured: 100 checks in 10 ms).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from typing import Any

import msgspec
import trio

from .._framing import FrameDecoder, FrameTooLarge, encode_frame
from .._schema_check import (
    MAX_WORKER_FRAME,
    Check,
    Invalid,
    Outcome,
    OutOfBound,
    Unusable,
    Valid,
    answer_decoder,
    encode,
)
from .._spawn import Child, open_child

log = logging.getLogger("zeroclaw.subagents")

VALIDATION_SECS = 5.0  # one input or result against its schema, waiting for a worker included
POOL_SIZE = 4  # checks at once, in all lanes; more wait (within their bound)
KEEP_IDLE = 2  # warm workers kept between checks
_READ_CHUNK = 1 << 16


class _Worker:
    def __init__(self, process: Child) -> None:
        self.process = process
        self.decoder = FrameDecoder(MAX_WORKER_FRAME)
        assert process.stdin is not None
        assert process.stdout is not None
        self.stdin = process.stdin
        self.stdout = process.stdout

    async def check(self, payload: bytes) -> bytes:
        await self.stdin.send_all(encode_frame(payload))
        while True:
            data = await self.stdout.receive_some(_READ_CHUNK)
            if not data:
                raise EOFError("the validation worker exited")
            frames = self.decoder.feed(data)
            if frames:
                return frames[0]

    async def kill(self) -> None:
        """SIGKILL and reap: a killed worker leaves neither a zombie nor a thread."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        with trio.CancelScope(shield=True):
            await self.process.wait()
            await self.stdin.aclose()
            await self.stdout.aclose()


class ValidatorPool:
    """`check(schema, instance)` within `bound` seconds, in a worker process. `aclose`
    kills the idle workers; a busy one is killed by its own check when that is cancelled."""

    def __init__(
        self, *, size: int = POOL_SIZE, keep: int = KEEP_IDLE, bound: float = VALIDATION_SECS
    ) -> None:
        self.size = size
        self.keep = keep
        self.bound = bound
        self._slots = trio.CapacityLimiter(size)
        self._lanes: dict[str, trio.Lock] = {}
        self._idle: list[_Worker] = []
        self._closed = False
        self.started = 0  # workers started since the daemon started (read by tests, status)
        self.killed = 0  # workers killed at their bound

    async def _spawn(self) -> _Worker:
        process = await open_child(
            [sys.executable, "-m", "zeroclaw._schema_worker", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self.started += 1
        return _Worker(process)

    async def check(self, schema: Any, instance: Any, *, lane: str = "") -> Outcome:
        """The outcome of validating `instance` against `schema`, after the checks before
        it in `lane`. Never raises for what the schema or the instance hold; `OutOfBound`
        once `bound` seconds have passed."""
        try:
            payload = encode(Check(msgspec.json.encode(schema), msgspec.json.encode(instance)))
        except (TypeError, ValueError, OverflowError) as exc:
            return Unusable(f"not JSON: {exc}")
        detail = f"validating took longer than its bound of {self.bound:g}s and was stopped"
        lock = self._lanes.setdefault(lane, trio.Lock())
        with trio.move_on_after(self.bound):
            async with lock, self._slots:
                return await self._run(payload)
        return OutOfBound(detail)

    async def _run(self, payload: bytes) -> Outcome:
        if self._closed:
            return OutOfBound("the daemon is stopping")
        worker = self._idle.pop() if self._idle else await self._spawn()
        done = False
        try:
            raw = await worker.check(payload)
            outcome: Outcome = answer_decoder.decode(raw)
            done = True
            return outcome
        except (EOFError, OSError, trio.BrokenResourceError, FrameTooLarge) as exc:
            log.error("a schema-validation worker failed: %r", exc)
            return OutOfBound(f"the validation worker died ({exc})")
        except msgspec.DecodeError as exc:
            log.error("a schema-validation worker answered garbage: %r", exc)
            return OutOfBound("the validation worker answered garbage")
        finally:
            if done and not self._closed and len(self._idle) < self.keep:
                self._idle.append(worker)
            else:
                if not done:  # at the bound, or broken
                    self.killed += 1
                await worker.kill()

    async def warm(self) -> None:
        """Start one worker ahead of the first check (a cold one costs its start)."""
        if not self._idle and not self._closed:
            worker = await self._spawn()
            if self._closed:
                await worker.kill()
            else:
                self._idle.append(worker)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for worker in idle:
            await worker.kill()


def describe(outcome: Outcome) -> str:
    """One line for a log or a detail."""
    if isinstance(outcome, Valid):
        return "valid"
    if isinstance(outcome, Invalid):
        return f"{outcome.message} at {outcome.pointer or '/'}"
    return outcome.detail
