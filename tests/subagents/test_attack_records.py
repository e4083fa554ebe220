"""Attacks on the durable side: the records a caller can make big, and the revision
snapshots under <state_dir>/revisions. Real daemon, real LMDB, real files.

These tests pin what SHOULD happen; they fail on the code as attacked (see the report).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.conftest import PATIENCE
from tests.subagents.helpers import dispatch_data as dispatch
from tests.subagents.helpers import start, subagent_config, write_bundle
from tests.supervisor.harness import Daemon

DaemonFactory = Callable[..., Daemon]


def test_big_inputs_from_callers_never_lock_the_operator_out_of_the_invocation_list(
    root: Path, daemons: DaemonFactory
) -> None:
    # Each dispatch is accepted (its request is under the 4 MiB control frame; an agent's
    # bus frame may be 64 MiB). `invocations list` puts every record whole (task, input,
    # output) in one reply, which then exceeds MAX_CONTROL_FRAME: the operator can no
    # longer list invocations at all, for good.
    write_bundle(root / "subagents", "summarizer")
    daemon = start(daemons, root)
    blob = root / "input.json"
    blob.write_text(json.dumps({"doc": "x" * 800_000}))
    for n in range(6):
        record = dispatch(daemon, "summarizer", f"part {n}", "--input", f"@{blob}")
        assert record["invocation"]["state"] == "succeeded", record["invocation"]["error_detail"]
    listing = daemon.cli("invocations", "list", "--json", timeout=60)
    assert listing.returncode == 0, (listing.stderr, daemon.log())
    assert len(json.loads(listing.stdout)["invocations"]) == 6


def test_a_deleted_revision_snapshot_is_written_again_by_a_reload(
    root: Path, daemons: DaemonFactory
) -> None:
    # The registry remembers every digest it materialised (`_by_digest`) and never looks
    # at the disk again: once <state_dir>/revisions/<digest> is gone (a cleanup, a disk
    # repair), no reload writes it back. Worse, the runner's `_ensure_workspace` mkdirs the
    # runtime's "workspace" (the snapshot path) empty, and the runtime then serves an EMPTY
    # revision (no prompt, no skills, no output schema) under the recorded digest.
    write_bundle(root / "subagents", "summarizer")
    daemon = start(daemons, root)
    [snapshot] = [p for p in (root / "state" / "revisions").iterdir() if not p.name.startswith(".")]
    for here in [snapshot, *snapshot.rglob("*")]:
        if here.is_dir():
            here.chmod(0o700)
    shutil.rmtree(snapshot)
    reload = daemon.cli("reload", timeout=60)
    assert reload.returncode == 0, (reload.stderr, daemon.log())
    record = dispatch(daemon, "summarizer", "rain")
    assert (snapshot / "SYSTEM.md").is_file(), "the runtime ran on an empty snapshot dir"
    assert record["invocation"]["state"] == "succeeded", record["invocation"]["error_detail"]


def test_an_emptied_snapshot_dir_is_not_trusted_after_a_restart(
    root: Path, daemons: DaemonFactory
) -> None:
    # `materialise` reuses any directory named after the digest without checking it. Once
    # a snapshot was deleted and the runner re-made it empty (the test above), even a
    # daemon restart keeps serving the empty revision under the recorded digest.
    write_bundle(root / "subagents", "summarizer")
    daemon = start(daemons, root)
    [snapshot] = [p for p in (root / "state" / "revisions").iterdir() if not p.name.startswith(".")]
    for here in [snapshot, *snapshot.rglob("*")]:
        if here.is_dir():
            here.chmod(0o700)
    shutil.rmtree(snapshot)
    dispatch(daemon, "summarizer", "rain")  # the runner re-makes the dir, empty
    daemon.stop()
    daemon = start(daemons, root)
    record = dispatch(daemon, "summarizer", "rain")
    assert (snapshot / "SYSTEM.md").is_file(), "after a restart the snapshot is still empty"
    assert record["invocation"]["state"] == "succeeded", record["invocation"]["error_detail"]


def test_a_snapshot_edited_behind_the_daemon_is_written_again_before_a_runtime_starts(
    root: Path, daemons: DaemonFactory
) -> None:
    # A runtime started on demand reads whatever the snapshot dir holds: here a SYSTEM.md
    # that the fault entry point reads as "post 5 tool events", which the digest never
    # covered. The daemon checks the snapshot against its digest before a runtime starts on
    # it and writes it again from the revision it holds: the edit never runs.
    write_bundle(root / "subagents", "summarizer")
    daemon = daemons(subagent_config(root), faults=True).start()
    [snapshot] = [p for p in (root / "state" / "revisions").iterdir() if not p.name.startswith(".")]
    system = snapshot / "SYSTEM.md"
    original = system.read_text()
    system.chmod(0o644)
    system.write_text("FLOOD-RUNTIME 5 10\n")
    record = dispatch(daemon, "summarizer", "rain")["invocation"]
    events = daemon.cli("invocations", "events", record["id"], "--json", timeout=60)
    tools = [json.loads(line)["body"] for line in events.stdout.splitlines() if '"tool"' in line]
    assert record["state"] == "succeeded", record
    assert [t["name"] for t in tools] == ["subagent_submit_result"], tools
    assert system.read_text() == original


def test_a_full_disk_while_an_invocation_ends_does_not_stop_the_daemon(
    root: Path, daemons: DaemonFactory
) -> None:
    # Disk full, made real with RLIMIT_FSIZE on the daemon process (SIGXFSZ ignored, so a
    # write past the limit fails with EFBIG as on a full disk). The invocation is
    # accepted (small record), then persisting its 100 KB result (an output schema with
    # minLength 100000, filled by the offline provider) fails: SubagentStoreFull
    # escapes `DispatchService._run` into the service's nursery and takes the daemon down,
    # with every agent and every other invocation.
    import resource
    import signal
    import subprocess

    from tests.conftest import REPO

    big = {
        "type": "object",
        "properties": {"summary": {"type": "string", "minLength": 100_000}},
        "required": ["summary"],
    }
    write_bundle(root / "subagents", "summarizer", output_schema=big)
    daemon = daemons(subagent_config(root), faults=False)
    log = daemon.log_path.open("ab")

    def ignore_sigxfsz() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    daemon.proc = subprocess.Popen(
        [*daemon.cli_argv(), "daemon"],
        stdout=log,
        stderr=log,
        env=daemon.env(),
        cwd=REPO,
        preexec_fn=ignore_sigxfsz,
    )
    daemon.wait_notification(lambda m: "READY=1" in m, timeout=PATIENCE)
    assert dispatch(daemon, "summarizer", "warm up")["invocation"]["state"] == "succeeded"
    size = (root / "state" / "subagents" / "data.mdb").stat().st_size
    limit = max(size, daemon.log_path.stat().st_size) + 32 * 1024
    resource.prlimit(daemon.proc.pid, resource.RLIMIT_FSIZE, (limit, limit))
    result = daemon.cli("dispatch", "summarizer", "--task", "rain", "--json", timeout=120)
    alive = daemon.proc.poll() is None and daemon.cli("status").returncode == 0
    assert alive, ("the daemon died on a full disk", result.stderr, daemon.log()[-1500:])


def test_an_idempotency_key_reused_for_another_sub_agent_is_not_answered_with_the_first(
    root: Path, daemons: DaemonFactory
) -> None:
    # The key is checked first and is scoped by (source, parent_run_id, key) only: a
    # dispatch to `translator` with a key once used for `summarizer` silently "succeeds"
    # with summarizer's invocation and output, and translator never runs.
    write_bundle(root / "subagents", "summarizer")
    write_bundle(root / "subagents", "translator")
    daemon = start(daemons, root)
    first = dispatch(daemon, "summarizer", "rain", "--idempotency-key", "k1")["invocation"]
    second = dispatch(daemon, "translator", "snow", "--idempotency-key", "k1")
    answered = second.get("invocation", {})
    assert answered.get("agent_id") != "summarizer", (
        f"translator was answered with {first['id']} of summarizer: {answered.get('output')}"
    )


def test_an_input_the_runtime_cannot_receive_is_refused_before_it_is_accepted(
    root: Path, daemons: DaemonFactory
) -> None:
    # Admission takes any input the control frame (4 MiB) or an agent's bus frame (64 MiB)
    # carries; the runtime's bus frames are 1 MiB. Such a dispatch is persisted `accepted`,
    # a runtime is forked, and it then fails `subagent_runtime_failed` ("the message is
    # ... bytes on the bus"), instead of a typed refusal that costs nothing.
    write_bundle(root / "subagents", "summarizer")
    daemon = start(daemons, root)
    blob = root / "input.json"
    blob.write_text(json.dumps({"doc": "x" * 1_500_000}))
    data = dispatch(daemon, "summarizer", "t", "--input", f"@{blob}")
    assert "invocation" not in data, data["invocation"]["error_detail"]
