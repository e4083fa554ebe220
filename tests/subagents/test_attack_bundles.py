"""Attacks through the files of a bundle an operator received from elsewhere: the daemon
must report the bad bundle and load the others (issue 12, Deliver 2), whatever the files
hold. Real daemon, real files.

These tests pin what SHOULD happen; they fail on the code as attacked (see the report).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.subagents.helpers import subagent_config, write_bundle
from tests.supervisor.harness import Daemon

DaemonFactory = Callable[..., Daemon]


def loaded_ids(daemon: Daemon) -> list[str]:
    result = daemon.cli("subagents", "list", "--json")
    assert result.returncode == 0, (result.stderr, daemon.log())
    data = json.loads(result.stdout)
    return sorted(entry["id"] for entry in data.get("subagents", []))


def deep_schema(bundle: Path) -> None:
    # 200 KB, under the 256 KB file cap: json.loads raises RecursionError, which
    # `_schema` does not catch (it catches JSONDecodeError only).
    (bundle / "schemas" / "input.json").write_text("[" * 100_000 + "]" * 100_000)


def deep_manifest(bundle: Path) -> None:
    # PyYAML's composer recurses: RecursionError, not a yaml.YAMLError.
    (bundle / "agent.yaml").write_text("[" * 50_000 + "]" * 50_000)


def deep_front_matter(bundle: Path) -> None:
    skill = bundle / "skills" / "deep"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nx: " + "[" * 50_000 + "]" * 50_000 + "\n---\nbody\n")
    manifest = bundle / "agent.yaml"
    manifest.write_text(manifest.read_text() + "skills: [./skills/deep]\n")


@pytest.mark.parametrize("poison", [deep_schema, deep_manifest, deep_front_matter])
def test_a_deeply_nested_bundle_file_is_refused_and_the_daemon_starts_with_the_others(
    root: Path, daemons: DaemonFactory, poison: Callable[[Path], None]
) -> None:
    write_bundle(root / "subagents", "good")
    poison(write_bundle(root / "subagents", "bad", input_schema={"type": "object"}))
    daemon = daemons(subagent_config(root), faults=False).start()
    assert loaded_ids(daemon) == ["good"], daemon.log()


def test_a_deeply_nested_bundle_dropped_in_before_a_reload_leaves_the_others_reloaded(
    root: Path, daemons: DaemonFactory
) -> None:
    write_bundle(root / "subagents", "good")
    daemon = daemons(subagent_config(root), faults=False).start()
    assert loaded_ids(daemon) == ["good"]
    write_bundle(root / "subagents", "fresh")
    deep_schema(write_bundle(root / "subagents", "bad", input_schema={"type": "object"}))
    reload = daemon.cli("reload", "--json", timeout=60)
    assert reload.returncode == 0, (reload.stdout, reload.stderr, daemon.log())
    assert loaded_ids(daemon) == ["fresh", "good"], daemon.log()


def test_a_hardlink_to_a_file_outside_the_bundle_is_refused(
    root: Path, daemons: DaemonFactory
) -> None:
    # realpath() cannot see a hardlink: the bundle's SYSTEM.md is the same inode as a file
    # outside it (here a stand-in for the config holding provider settings), and its text
    # becomes the system prompt sent to the model provider.
    secret = root / "outside-secret.txt"
    secret.write_text("API_KEY=sk-live-do-not-send\n")
    bundle = write_bundle(root / "subagents", "linked")
    (bundle / "SYSTEM.md").unlink()
    os.link(secret, bundle / "SYSTEM.md")
    daemon = daemons(subagent_config(root), faults=False).start()
    assert loaded_ids(daemon) == [], "a bundle file hardlinked from outside was loaded"
    revisions = list((root / "state" / "revisions").glob("*/SYSTEM.md"))
    assert not any("sk-live" in p.read_text() for p in revisions)


def test_a_bundle_file_swapped_for_a_fifo_never_blocks_the_loader(root: Path) -> None:
    # `_Reader.read` stat()s the path, then opens it again by name with a blocking open().
    # A file replaced by a FIFO in between (an unpacker or sync tool writing the bundle
    # while a reload scans it, or a hostile local writer) blocks open() forever. In the
    # daemon that is the rescan's worker thread, holding SubagentRegistry._lock and the
    # supervisor's reload lock: every later reload and SIGHUP then hangs. Real files, a
    # real FIFO, a real racing writer; load_bundle is what the daemon's rescan runs.
    import threading
    import time

    from zeroclaw.subagents import load_bundle

    bundle = write_bundle(root / "subagents", "racy")
    system, regular, fifo = bundle / "SYSTEM.md", bundle / ".regular", bundle / ".fifo"
    stop = threading.Event()
    loads = [0]

    def swap() -> None:
        while not stop.is_set():
            regular.write_text("prompt\n")
            os.rename(regular, system)
            os.mkfifo(fifo)
            os.rename(fifo, system)

    def load() -> None:
        for _ in range(500):
            load_bundle(bundle, providers=frozenset({"offline.default"}))
            loads[0] += 1

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    loader = threading.Thread(target=load, daemon=True)  # may stay blocked: daemon thread
    loader.start()
    last, since = -1, time.monotonic()
    try:
        # 30 s without one load done: blocked (on a FIFO), not slowed by a loaded machine.
        while loader.is_alive() and time.monotonic() - since < 30:
            loader.join(0.5)
            if loads[0] != last:
                last, since = loads[0], time.monotonic()
    finally:
        stop.set()
        swapper.join()  # before the directory goes: a swap after it fails in its thread
    assert not loader.is_alive(), f"load_bundle blocked for 30 s after {loads[0]} loads"
