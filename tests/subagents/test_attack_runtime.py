"""A hostile runtime process against a real daemon: its only channel is the turn service,
and the daemon (the trust boundary) must hold the revision's policy against what it posts.

These tests pin what SHOULD happen; they fail on the code as attacked (see the report).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import PATIENCE
from tests.subagents.helpers import subagent_config, write_bundle
from tests.supervisor.harness import Daemon

DaemonFactory = Callable[..., Daemon]


def test_a_runtime_cannot_post_more_tool_calls_than_max_tool_calls(
    root: Path, daemons: DaemonFactory
) -> None:
    # maxToolCalls is enforced only inside the runtime (SubagentEngine). The daemon
    # persists every ToolUsed a runtime posts, each in its own durable LMDB commit, with
    # args of any size up to a bus frame: one compromised runtime with maxToolCalls 2
    # writes 300 events (here 3 MB; at 1 MiB args and timeoutSeconds 120, gigabytes) into
    # the store every other invocation and the operator's listings depend on.
    write_bundle(
        root / "subagents",
        "summarizer",
        max_tool_calls=2,
        system="FLOOD-RUNTIME 300 10000\n",
    )
    daemon = daemons(subagent_config(root), faults=True).start()
    result = daemon.cli("dispatch", "summarizer", "--task", "t", "--json", timeout=120)
    assert result.stdout, (result.stderr, daemon.log())
    record = json.loads(result.stdout)["invocation"]
    events = daemon.cli("invocations", "events", record["id"], "--json", timeout=60)
    tools = [line for line in events.stdout.splitlines() if '"tool"' in line]
    assert len(tools) <= 2 or record["state"] == "failed", (
        f"{len(tools)} tool events persisted for maxToolCalls 2; state {record['state']}"
    )
    assert len(tools) <= 3, f"{len(tools)} tool events persisted for maxToolCalls 2"


def test_a_reload_storm_of_bundle_edits_leaves_no_stale_runtimes_behind(
    root: Path, daemons: DaemonFactory
) -> None:
    # Each edit is a new revision, hence a new runtime process on its first dispatch. The
    # old revisions' runtimes are not current any more and run nothing, yet each stays up
    # for RUNTIME_IDLE_STOP_SECS (300 s): an editor or sync tool that rewrites a bundle
    # (and a reload per change) piles up one process per revision.
    from tests.subagents.test_dispatch_daemon import runtime_pids
    from tests.supervisor.harness import process_alive

    daemon = daemons(subagent_config(root), faults=False).start()
    for n in range(5):
        write_bundle(root / "subagents", "summarizer", system=f"Revision {n}.\n")
        assert daemon.cli("reload", timeout=60).returncode == 0, daemon.log()
        result = daemon.cli("dispatch", "summarizer", "--task", "t", "--json", timeout=120)
        assert json.loads(result.stdout)["invocation"]["state"] == "succeeded"
    pids = {pid for found in runtime_pids(daemon, "summarizer").values() for pid in found}
    assert len(pids) == 5
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if process_alive(pid)]
        if len(alive) <= 1:
            break
        time.sleep(0.5)  # polling other processes' exit: no event reaches the test
    assert len(alive) <= 1, f"{len(alive)} runtimes alive for one current revision"
