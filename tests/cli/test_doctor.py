"""`zeroclaw doctor` through the real CLI: each failure is made real (an unset key variable, a
world-writable dir, a stale lock, a damaged LMDB file, a closed port, a running daemon)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomli_w
import trio

from tests.bodies import write_args
from tests.cli.helpers import run_cli
from tests.providers.protocol_server import ScriptedServer, status
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.memory import MemoryStore, Scope, WriteOp
from zeroclaw.policy import abi_version

KEY_ENV = "ZC_DOCTOR_TEST_KEY"
SECRET = "sk-doctor-test-secret-0451"


def write_config(root: Path, providers: dict[str, Any] | None = None, **agents: Any) -> Path:
    doc = make_config(root, agents or {"alpha": agent_entry()})
    doc["providers"].update(providers or {})
    path = root / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


def doctor(
    config: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, str]]]:
    # No user unit of this machine's user may leak into what the tests see.
    env = {"XDG_CONFIG_HOME": str(config.parent / "xdg"), **(env or {})}
    result = run_cli("--config", config, "doctor", "--json", *args, env=env)
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1 and data["ok"] is (result.returncode == 0), result.stdout
    return result, {c["name"]: c for c in data["checks"]}


def openai(base_url: str) -> dict[str, Any]:
    return {"model": "m", "base_url": base_url, "api_key_env": KEY_ENV}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when we return: nothing listens there


def test_no_config_fails_and_warnings_alone_exit_0(root: Path) -> None:
    missing = run_cli("--config", root / "nope.toml", "doctor")
    assert missing.returncode == 1
    assert missing.stdout.startswith("FAIL  config:") and "fix:" in missing.stdout

    result, checks = doctor(write_config(root))
    assert result.returncode == 0, result.stdout  # nothing runs yet: warnings only
    assert checks["config"]["status"] == "ok"
    assert checks["daemon"]["status"] == "warn"
    # A hint names the command as it must be run: with the --config that was passed.
    assert f"'zeroclaw --config {root / 'zeroclaw.toml'} daemon'" in checks["daemon"]["fix"]
    assert checks["systemd unit"]["status"] == "warn"
    assert "service install" in checks["systemd unit"]["fix"]
    assert checks["providers reachable"]["message"] == "not checked; use --network to check"
    if abi_version() >= 1:
        assert checks["landlock"]["message"] == f"Landlock ABI {abi_version()}"


def test_an_unset_key_variable_fails_and_a_set_one_is_never_printed(root: Path) -> None:
    config = write_config(
        root,
        {"openai": {"o": openai(f"http://127.0.0.1:{closed_port()}/v1")}},
        alpha=agent_entry(model_provider="openai.o"),
    )
    assert KEY_ENV not in os.environ
    result, checks = doctor(config)
    assert result.returncode == 1
    key = checks["provider openai.o: key"]
    assert key["status"] == "fail" and KEY_ENV in key["message"] and "alpha" in key["message"]

    result, checks = doctor(config, "--network", env={KEY_ENV: SECRET})
    assert checks["provider openai.o: key"]["status"] == "ok"
    assert checks["provider openai.o: reachable"]["status"] == "fail"  # the closed port
    assert "ConnectError" in checks["provider openai.o: reachable"]["message"]
    human = run_cli("--config", config, "doctor", "--network", env={KEY_ENV: SECRET})
    for output in (result.stdout, result.stderr, human.stdout, human.stderr):
        assert SECRET not in output


async def test_with_network_a_provider_that_answers_is_ok_and_a_closed_port_fails(
    root: Path,
) -> None:
    server = ScriptedServer([], default=status(200, "a models list"))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        config = write_config(
            root,
            {
                "openai": {
                    "up": openai(f"{server.url}/v1"),
                    "down": openai(f"http://127.0.0.1:{closed_port()}/v1"),
                }
            },
            alpha=agent_entry(model_provider="openai.up"),
            beta=agent_entry(model_provider="openai.down"),
        )

        def run(*args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
            return doctor(config, *args, env={KEY_ENV: SECRET})

        _, checks = await trio.to_thread.run_sync(run)
        assert server.seen == []  # no --network: no request at all
        assert checks["providers reachable"]["status"] == "ok"

        result, checks = await trio.to_thread.run_sync(run, "--network")
        nursery.cancel_scope.cancel()
    assert result.returncode == 1
    assert checks["provider openai.up: reachable"]["status"] == "ok"
    assert "HTTP 200" in checks["provider openai.up: reachable"]["message"]
    assert checks["provider openai.down: reachable"]["status"] == "fail"
    [seen] = server.seen  # one bounded GET, with the key it checks
    assert seen.path == "/v1/models" and seen.headers["authorization"] == f"Bearer {SECRET}"


def test_dirs_open_to_others_or_owned_by_someone_else_fail(root: Path) -> None:
    config = write_config(root)
    state, run = root / "state", root / "run"
    state.mkdir(mode=0o700)
    run.mkdir(mode=0o700)
    result, checks = doctor(config)
    assert checks["state dir"]["status"] == checks["runtime dir"]["status"] == "ok"

    state.chmod(0o777)
    os.chown(run, 12345, 12345)
    result, checks = doctor(config)
    assert result.returncode == 1
    assert checks["state dir"]["status"] == "fail"
    assert checks["state dir"]["fix"] == f"chmod 700 {state}"
    assert checks["runtime dir"]["status"] == "fail"
    assert checks["runtime dir"]["fix"] == f"chown -R {os.geteuid()} {run}"


LOCK_HOLDER = """
import sys
from pathlib import Path
from zeroclaw._flock import FileLock
lock = FileLock(Path(sys.argv[1]), record_pid=True, make_parent=True)
lock.acquire()
print("held", flush=True)
sys.stdin.read()
"""


def test_a_lock_held_without_a_daemon_and_a_stale_one_fail(root: Path) -> None:
    config = write_config(root)
    lock = root / "run" / "zeroclaw.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        result, checks = doctor(config)
        assert result.returncode == 1
        held = checks["daemon lock"]
        assert held["status"] == "fail" and f"held by pid {holder.pid}" in held["message"]
        assert "does not answer" in held["message"]
    finally:
        holder.kill()  # SIGKILL: the pid stays written in the file
        holder.wait()

    result, checks = doctor(config)
    assert result.returncode == 1
    stale = checks["daemon lock"]
    assert stale["status"] == "fail" and f"left by pid {holder.pid}" in stale["message"]
    assert stale["fix"].startswith("harmless") and f"rm {lock}" in stale["fix"]

    lock.unlink()
    _, checks = doctor(config)
    assert checks["daemon lock"]["status"] == "ok"


def make_memory_store(path: Path) -> None:
    store = MemoryStore(path)
    op = WriteOp(Scope("alpha"), write_args("store", {"key": "k", "content": "remember this"}))
    store.apply_writes([op])
    assert op.error is None
    store.close()


READER = """
import sys, lmdb
env = lmdb.open(sys.argv[1], max_dbs=8192, max_readers=1024)
txn = env.begin()
txn.get(b"zeroclaw-memory-format")
print("reading", flush=True)
sys.stdin.read()
"""


def snapshot(path: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(path.iterdir())}


def test_a_stale_reader_is_counted_and_lmdb_is_left_untouched(root: Path) -> None:
    config = write_config(root)
    memory = root / "state" / "memory"
    make_memory_store(memory)
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(memory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout is not None and reader.stdout.readline() == "reading\n"
    reader.send_signal(signal.SIGKILL)  # its reader slot stays in lock.mdb
    reader.wait()
    before = snapshot(memory)

    for _ in range(2):  # counted, and still there the second time: never cleared
        result, checks = doctor(config)
        assert result.returncode == 0, result.stdout
        readers = checks["memory store: readers"]
        assert readers["status"] == "warn"
        assert readers["message"].startswith("1 reader slot(s)")
        assert f"pid {reader.pid}" in readers["message"]
    assert snapshot(memory) == before
    store = checks["memory store"]
    assert store["status"] == "ok" and "format 3" in store["message"]
    assert checks["memory store: map"]["status"] == "ok"
    assert "of a 1.0 GiB map" in checks["memory store: map"]["message"]


def test_a_damaged_memory_store_fails_with_how_to_move_it_aside(root: Path) -> None:
    config = write_config(root)
    memory = root / "state" / "memory"
    make_memory_store(memory)
    data = memory / "data.mdb"
    data.write_bytes(os.urandom(data.stat().st_size))  # garbage, same size
    result, checks = doctor(config)
    assert result.returncode == 1
    damaged = checks["memory store"]
    assert damaged["status"] == "fail" and "not an LMDB file" in damaged["message"]
    assert f"mv {memory} {memory}.damaged" in damaged["fix"]

    data.write_bytes(data.read_bytes()[:100])  # truncated below its header pages
    _, checks = doctor(config)
    assert "shorter than its two header pages" in checks["memory store"]["message"]


def test_a_running_daemon_answers_and_everything_it_holds_is_fine(
    root: Path, daemons: Callable[..., Any]
) -> None:
    daemon = daemons(make_config(root, {"alpha": agent_entry()}), faults=False).start()
    alpha = daemon.agent("alpha")
    result = daemon.cli("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert result.returncode == 0, result.stdout
    daemon_pid = daemon.status()["daemon"]["pid"]
    assert checks["daemon"]["status"] == "ok" and f"pid {daemon_pid}" in checks["daemon"]["message"]
    for name in ("router socket", "state dir", "runtime dir", "memory store", "sub-agent store"):
        assert checks[name]["status"] == "ok", checks[name]
    for name in ("daemon lock", "memory lock", "sub-agent store lock"):
        assert checks[name]["status"] == "ok", checks[name]
        assert f"held by pid {daemon_pid} (the daemon)" in checks[name]["message"]
    assert checks["memory store: readers"]["status"] == "ok"
    # What alpha reported about its own sandbox; not reported (None) is a warning.
    in_force = checks["agent alpha: sandbox in force"]
    assert in_force["status"] == ("ok" if alpha["sandbox_in_force"] else "warn")
    if alpha["sandbox_in_force"] is None:
        assert "has not reported" in in_force["message"]
