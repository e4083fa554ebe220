"""One conformance daemon for the package (one agent per profile and grant), one config
with no daemon for the in-process cells, and the table written at the end of the session
when ZEROCLAW_CONFORMANCE_TABLE names a directory (`make conformance`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bodies import write_args
from tests.conftest import REPO
from tests.known_secrets import API_TOKEN, HOOK_SECRET, TELEGRAM_HOOK_TOKEN, TELEGRAM_TOKEN
from tests.supervisor import harness
from zeroclaw.control import Chat, ControlClient
from zeroclaw.memory import MemoryStore, Scope, WriteOp

from . import _table
from ._matrix import MCP_NAMED, MCP_OTHER, all_cells
from ._world import (
    API_TOKEN_ENV,
    ENTRYPOINT,
    SESSION_MARKER,
    Device,
    World,
    conformance_config,
    daemon_code,
    free_port,
    lay_out,
    lay_out_adapters,
    prepare_probes,
    remove_planted,
)

TABLE_ENV = "ZEROCLAW_CONFORMANCE_TABLE"


@pytest.fixture(scope="package")
def world() -> Iterator[World]:
    root = harness.short_root()
    bin_dir = harness.short_root()  # outside the project: a trusted program's directory
    port, gateway_port, bot_port = free_port(), free_port(), free_port()
    hook_bot_port = free_port()
    doc = conformance_config(root, port, gateway_port, bot_port, hook_bot_port)
    lay_out(root)
    path = lay_out_adapters(root, bin_dir)
    daemon = harness.Daemon(root, doc, faults=False)
    world = World(
        root,
        daemon,
        doc,
        port=port,
        gateway_port=gateway_port,
        device=Device(root / "ttyDESK"),
        bot_port=bot_port,
        hook_bot_port=hook_bot_port,
    )
    # Telegram, as the Telegram channel meets it: a loopback Bot API (tests/channels).
    bot_api = subprocess.Popen(
        [sys.executable, "-m", "tests.channels.fake_bot_api", TELEGRAM_TOKEN, str(bot_port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    hook_bot_api = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.channels.fake_bot_api",
            TELEGRAM_HOOK_TOKEN,
            str(hook_bot_port),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    # A user site of the daemon's own (PYTHONUSERBASE), so that kind of code has cells too.
    userbase = root / "userbase"
    env = {
        "ZEROCLAW_AGENT_ENTRYPOINT": ENTRYPOINT,
        "HOOK_SECRET": HOOK_SECRET,
        "TG_TOKEN": TELEGRAM_TOKEN,
        "TG_HOOK_TOKEN": TELEGRAM_HOOK_TOKEN,
        API_TOKEN_ENV: API_TOKEN,
        "PATH": path,
        "PYTHONUSERBASE": str(userbase),
        # What the MCP agents' servers name (ADR 0053): h gets the first, only h2 the other.
        MCP_NAMED: "named-value",
        MCP_OTHER: "other-value",
    }
    site = subprocess.run(
        [sys.executable, "-c", "import site; print(site.getusersitepackages())"],
        env=daemon.env(**env),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site).mkdir(parents=True)
    world.code = daemon_code(daemon.env(**env))
    prepare_probes(world)
    try:
        assert bot_api.stdout is not None
        assert bot_api.stdout.readline().strip() == str(bot_port)  # serving
        assert hook_bot_api.stdout is not None
        assert hook_bot_api.stdout.readline().strip() == str(hook_bot_port)
        daemon.start(**env)
        world.memory("store", "owner", key="ownersecret", content="ownersecret launch code")
        world.owner_record = world.memory("get", "owner", key="ownersecret")["record"]["id"]
        reply = ControlClient(world.run_dir).request(
            Chat(agent="owner", text=f"hello {SESSION_MARKER}", session="default")
        )
        assert reply.ok, reply
        # Made after every agent's start: next to an ancestor of a forbidden path.
        (root / "outside" / "later.txt").write_text("made later")
        yield world
    finally:
        daemon.stop()
        for fake in (bot_api, hook_bot_api):
            fake.kill()
            fake.wait()
        world.device.close()
        planted = remove_planted(world.code)
        harness.remove_root(root)
        harness.remove_root(bin_dir)
    assert not planted, f"an agent planted files in the daemon's code: {planted}"


@pytest.fixture(scope="package")
def offline_world() -> Iterator[World]:
    """The same config and files, no daemon: `chat -m` runs the agent in the CLI."""
    root = harness.short_root()
    doc = conformance_config(root, 0)
    lay_out(root)
    world = World(root, None, doc)
    world.config_path.write_text(__import__("tomli_w").dumps(doc))
    # owner's record, for read_memory_from (the store the in-process chat opens)
    store = MemoryStore(root / "state" / "memory")
    try:
        args = {"key": "ownersecret", "content": "ownersecret launch code"}
        store.apply_writes([WriteOp(Scope("owner"), write_args("store", args))])
    finally:
        store.close()
    try:
        yield world
    finally:
        harness.remove_root(root)


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get(TABLE_ENV)
    if not target or not _table.RESULTS:
        return
    table = _table.write(Path(target), all_cells())
    width = max(len(r["case"]) for r in table)
    print(f"\nconformance table ({len(table)} cells) -> {target}/TABLE.md")
    for r in table:
        if r["status"] != "held":
            case = r["case"].encode("unicode_escape").decode()[:60]
            print(
                f"  {r['status']:8} {r['boundary']:18} {r['path']:18} {r['profile']:18} "
                f"{case:{min(width, 60)}} expected {r['expected']}, observed {r['observed']}"
            )
