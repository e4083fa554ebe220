"""The validation worker pool (ADR 0046): real worker processes, a check past its bound
SIGKILLed and reaped, lanes that keep a costly caller from slowing the others."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import trio
import trio.testing

from zeroclaw.subagents import Invalid, OutOfBound, Unusable, Valid, ValidatorPool

UNIQUE = {"type": "array", "uniqueItems": True}
COSTLY = [{"k": i} for i in range(20_000)]  # pairwise equal(): minutes in jsonschema


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_each_outcome_comes_back_typed_from_a_worker() -> None:
    pool = ValidatorPool(bound=60)
    try:
        assert await pool.check({"type": "integer"}, 1) == Valid()
        invalid = await pool.check({"properties": {"n": {"type": "integer"}}}, {"n": "x"})
        assert isinstance(invalid, Invalid) and invalid.pointer == "/n"
        unusable = await pool.check({"$ref": "#/$defs/nope"}, 1)
        assert isinstance(unusable, Unusable) and "nope" in unusable.detail
        assert pool.started == 1, "a warm worker serves check after check"
    finally:
        await pool.aclose()


async def test_a_check_past_its_bound_is_killed_and_reaped_and_the_pool_goes_on() -> None:
    pool = ValidatorPool(bound=1)
    try:
        await pool.warm()
        [worker] = pool._idle
        pid = worker.process.pid
        outcome = await pool.check(UNIQUE, COSTLY)
        assert isinstance(outcome, OutOfBound) and "bound" in outcome.detail
        assert pool.killed == 1 and _gone(pid), "the worker outlived its check"
        pool.bound = 60  # a new worker starts: under load that alone can take a second
        assert await pool.check({"type": "integer"}, 1) == Valid()
    finally:
        await pool.aclose()


async def test_a_costly_lane_does_not_hold_another_lane() -> None:
    pool = ValidatorPool(bound=60)
    order: list[str] = []

    async def check(lane: str, schema: object, instance: object) -> None:
        await pool.check(schema, instance, lane=lane)
        order.append(lane)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(check, "hostile", UNIQUE, COSTLY)
            # The hostile check has its lane and its worker, and waits for the answer.
            await trio.testing.wait_all_tasks_blocked()
            await check("honest", {"type": "integer"}, 1)
            assert order == ["honest"], "the honest lane waited for the hostile one"
            nursery.cancel_scope.cancel()  # a cancelled check kills its worker too
        assert pool.killed == 1
    finally:
        await pool.aclose()


async def test_closing_the_pool_kills_its_idle_workers() -> None:
    pool = ValidatorPool(bound=60)
    await pool.warm()
    pids = [w.process.pid for w in pool._idle]
    await pool.aclose()
    assert pids and all(_gone(pid) for pid in pids)
    assert isinstance(await pool.check({"type": "integer"}, 1), OutOfBound)


CONFINED = """
import socket, sys
import zeroclaw._jsonschema
from zeroclaw._schema_worker import confine
assert confine(), "no Landlock on this kernel"
for path, mode in ((sys.argv[1], "r"), (sys.argv[2], "w")):
    try:
        open(path, mode)
    except PermissionError:
        continue
    sys.exit(f"{path} opened ({mode})")
try:  # a check needs no network: no TCP connect, not even to a loopback listener
    socket.create_connection(("127.0.0.1", int(sys.argv[3])), timeout=5).close()
    sys.exit("connected over TCP")
except PermissionError:
    pass
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sys.exit("opened a UDP socket")
except PermissionError:
    pass
"""


def test_a_worker_reads_only_its_code_writes_nothing_and_connects_nowhere(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "zeroclaw.toml"
    secret.write_text("the operator's config\n")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    with listener:
        result = subprocess.run(
            [sys.executable, "-c", CONFINED, str(secret), str(tmp_path / "made"), str(port)],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
        )
    assert result.returncode == 0, result.stderr


async def test_a_pool_worker_runs_without_new_privileges() -> None:
    pool = ValidatorPool(bound=60)
    try:
        await pool.warm()
        [worker] = pool._idle
        assert await pool.check({"type": "integer"}, 1) == Valid()  # confined, and it works
        status = await trio.Path(f"/proc/{worker.process.pid}/status").read_text()
        assert "NoNewPrivs:\t1" in status, status
    finally:
        await pool.aclose()
