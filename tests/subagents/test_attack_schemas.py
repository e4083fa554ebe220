"""Attacks through the schemas of a bundle an operator received from elsewhere, against a
real daemon: schemas that pass `check_schema` at load but break (or stall) the daemon when
they are used to validate an input or a result.

These tests pin what SHOULD happen; they fail on the code as attacked (see the report).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO
from tests.subagents.helpers import dispatch_data as dispatch
from tests.subagents.helpers import start, write_bundle
from tests.supervisor.harness import Daemon, wait_for_process

VALIDATOR_WORKER = "zeroclaw._schema_worker"

DaemonFactory = Callable[..., Daemon]


def refused_problems(daemon: Daemon, agent_id: str) -> str:
    """The problems `subagents list` reports for the refused bundle `agent_id`."""
    listing = daemon.cli("subagents", "list", "--json")
    assert listing.returncode == 0, (listing.stderr, daemon.log())
    data = json.loads(listing.stdout)
    assert agent_id not in {s["id"] for s in data["subagents"]}, data
    [refused] = [r for r in data["refused"] if r["path"].endswith(f"/{agent_id}")]
    return " ".join(refused["problems"])


def status_answers_while(daemon: Daemon, command: subprocess.Popen[str], doing: str) -> str:
    """Ask `zeroclaw status` back to back for as long as `command` runs, each answer within
    its bound, and answer what `command` printed. Checking a schema on the daemon's own
    thread would hold the probe asked meanwhile for as long as the check (minutes)."""
    try:
        while command.poll() is None:
            began = time.monotonic()
            try:
                status = daemon.cli("status", "--json", timeout=60)
            except subprocess.TimeoutExpired:
                status = None
            waited = time.monotonic() - began
            assert status is not None and status.returncode == 0, (
                f"`zeroclaw status` got no answer in {waited:.0f}s while {doing}",
                daemon.log(),
            )
        printed, _ = command.communicate(timeout=60)
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()
    return printed


def test_an_output_schema_with_an_unresolvable_ref_is_refused_at_load_and_the_others_serve(
    root: Path, daemons: DaemonFactory
) -> None:
    # check_schema accepts it: a $ref is only resolved when an instance reaches it, which
    # raised referencing's Unresolvable inside `verdict`. Every $ref is resolved at load
    # instead: the bundle is refused, naming the ref, and never runs.
    write_bundle(
        root / "subagents",
        "summarizer",
        output_schema={
            "type": "object",
            "properties": {"summary": {"$ref": "#/$defs/missing"}},
            "required": ["summary"],
        },
    )
    write_bundle(root / "subagents", "other")
    daemon = start(daemons, root)
    assert "'#/$defs/missing'" in refused_problems(daemon, "summarizer")
    result = daemon.cli(
        "dispatch", "summarizer", "--task", 'submit: {"summary": "x"}', "--json", timeout=120
    )
    assert daemon.cli("status").returncode == 0, ("the daemon died", result.stderr, daemon.log())
    assert json.loads(result.stdout).get("error") == "subagent_not_found", result.stdout
    # The daemon keeps serving the other sub-agents.
    other = dispatch(daemon, "other", "rain")
    assert other["invocation"]["state"] == "succeeded", (other, daemon.log())


def test_an_input_schema_with_a_remote_ref_is_refused_at_load_and_a_dispatch_is_not_found(
    root: Path, daemons: DaemonFactory
) -> None:
    # No fetch ever happened (referencing has no retriever), but the Unresolvable error
    # escaped `admit`. A ref that is not local is now refused when the bundle is read.
    write_bundle(
        root / "subagents",
        "summarizer",
        input_schema={
            "type": "object",
            "properties": {"doc": {"$ref": "https://schemas.example.invalid/doc.json"}},
        },
    )
    write_bundle(root / "subagents", "other")
    daemon = start(daemons, root)
    assert "'https://schemas.example.invalid/doc.json'" in refused_problems(daemon, "summarizer")
    result = daemon.cli(
        "dispatch", "summarizer", "--task", "t", "--input", '{"doc": 1}', "--json", timeout=60
    )
    daemon.assert_alive()
    assert result.stdout, (result.returncode, result.stderr, daemon.log())
    assert json.loads(result.stdout).get("error") == "subagent_not_found", result.stdout
    assert daemon.status()["agents"], daemon.log()
    other = dispatch(daemon, "other", "rain")
    assert other["invocation"]["state"] == "succeeded", (other, daemon.log())


def test_validating_a_caller_input_never_stalls_the_daemon(
    root: Path, daemons: DaemonFactory
) -> None:
    # A plain, benign-looking input schema (uniqueItems over objects). jsonschema's
    # uniqueItems falls back to an O(n^2) Python comparison for unsortable items, and
    # `admit` runs it on the daemon's trio thread: an allowed caller (any agent in
    # allowedCallers sends the same `input`) freezes every control command, every agent's
    # bus traffic and the watchdog for minutes with a ~40 KB input.
    write_bundle(
        root / "subagents",
        "summarizer",
        input_schema={
            "type": "object",
            "properties": {"items": {"type": "array", "uniqueItems": True}},
        },
    )
    daemon = start(daemons, root)
    payload = json.dumps({"items": [{"k": i} for i in range(6000)]})
    stall = daemon.cli_popen(
        "dispatch",
        "summarizer",
        "--task",
        "t",
        "--input",
        payload,
        "--json",
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    printed = status_answers_while(daemon, stall, "one input was validated")
    # The check was reached, and stopped at its bound (in a worker) while status answered.
    assert json.loads(printed)["error"] == "subagent_validation_timeout", printed


def test_a_regex_pattern_in_an_output_schema_never_stalls_the_daemon(
    root: Path, daemons: DaemonFactory
) -> None:
    # The result comes from the runtime (whose model read untrusted material); `verdict`
    # validated it on the daemon's trio thread with Python's backtracking `re`. Patterns
    # are RE2's now (linear time), applied in a worker under its bound.
    write_bundle(
        root / "subagents",
        "summarizer",
        output_schema={
            "type": "object",
            "properties": {"summary": {"type": "string", "pattern": "^(a+)+$"}},
            "required": ["summary"],
        },
    )
    daemon = start(daemons, root)
    evil = "a" * 40 + "!"
    stall = daemon.cli_popen(
        "dispatch",
        "summarizer",
        "--task",
        f'submit: {{"summary": "{evil}"}}',
        "--json",
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    printed = status_answers_while(daemon, stall, "one result was validated")
    # The result was checked against the pattern (a linear-time engine: refused at once).
    invocation = json.loads(printed)["invocation"]
    assert invocation["error_code"] == "subagent_output_invalid", printed
    assert "'^(a+)+$'" in invocation["error_detail"], printed


def test_an_agent_dispatch_to_a_bundle_refused_for_a_remote_ref_is_not_found_and_the_daemon_lives(
    root: Path, daemons: DaemonFactory
) -> None:
    # The same schema on the bus path, where the escape reached the router's service
    # handling. Refused at load now: alpha (a caller of "other", so it has the tool) is
    # told the sub-agent does not exist, and "other" still serves it.
    write_bundle(
        root / "subagents",
        "summarizer",
        callers=("alpha",),
        input_schema={"allOf": [{"$ref": "https://schemas.example.invalid/doc.json"}]},
    )
    write_bundle(root / "subagents", "other", callers=("alpha",))
    daemon = start(daemons, root)
    assert "'https://schemas.example.invalid/doc.json'" in refused_problems(daemon, "summarizer")
    chat = daemon.cli("--agent", "alpha", "chat", "-m", "dispatch summarizer: rain", "--json")
    assert daemon.cli("status").returncode == 0, ("the daemon died", chat.stderr, daemon.log())
    assert chat.returncode == 0, (chat.stderr, daemon.log())
    [call] = json.loads(chat.stdout)["tool_calls"]
    assert call["ok"] is False and call["error_code"] == "subagent_not_found", call
    chat = daemon.cli("--agent", "alpha", "chat", "-m", "dispatch other: rain", "--json")
    [call] = json.loads(chat.stdout)["tool_calls"]
    assert (call["name"], call["ok"]) == ("agent_dispatch", True), (call, daemon.log())


HOSTILE_INPUT_SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "uniqueItems": True}},
}


def test_hostile_validations_are_stopped_at_their_bound_and_the_daemon_serves_and_stops(
    root: Path, daemons: DaemonFactory
) -> None:
    # Issue 24, found 8: each check ran in a trio worker thread that was abandoned, not
    # stopped, at its bound, and kept its thread token: ~30 in flight made `memory store`
    # wait for a thread, `status` crawl, and SIGTERM not stop the daemon. Now each check
    # runs in a worker process that is SIGKILLed at the bound (ADR 0046): with 48 hostile
    # dispatches kept in flight, the daemon answers, dispatches others, and stops on
    # SIGTERM with 0.
    write_bundle(root / "subagents", "hostile", input_schema=HOSTILE_INPUT_SCHEMA)
    write_bundle(root / "subagents", "other")
    daemon = start(daemons, root)
    assert daemon.proc is not None
    hostile = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.subagents.hostile_dispatcher",
            str(daemon.runtime_dir),
            "hostile",
            "48",
            "6000",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert hostile.stdout is not None and hostile.stdout.readline() == "sent\n"
        # A worker process exists: checks are running (the pool starts them on demand).
        worker = [Path(sys.executable).name, "-m", VALIDATOR_WORKER, str(daemon.proc.pid)]
        wait_for_process(worker, timeout=60, under=daemon.proc.pid)
        # The answers are awaited, not timed: before the fix `memory store` waited for a
        # thread that none of the abandoned checks would give back within the test.
        assert daemon.cli("status", "--json", timeout=120).returncode == 0, daemon.log()
        stored = daemon.cli("memory", "store", "k", "v", "--agent", "alpha", timeout=120)
        assert stored.returncode == 0, (stored.stderr, daemon.log())
        other = dispatch(daemon, "other", "rain")
        assert other["invocation"]["state"] == "succeeded", (other, daemon.log())
        # One hostile dispatch of our own: refused with the bound's code, the check stopped.
        _, answer = dispatch_with_code(daemon)
        assert answer.get("error") == "subagent_validation_timeout", answer
        assert hostile.poll() is None, "the hostile client stopped: nothing is in flight"
        daemon.signal(signal.SIGTERM)
        assert daemon.wait_exit(timeout=120) == 0, daemon.log()
    finally:
        hostile.kill()
        hostile.wait()


def dispatch_with_code(daemon: Daemon) -> tuple[int, dict[str, object]]:
    payload = json.dumps({"items": [{"k": i} for i in range(6000)]})
    result = daemon.cli(
        "dispatch", "hostile", "--task", "t", "--input", payload, "--json", timeout=120
    )
    return result.returncode, json.loads(result.stdout)
