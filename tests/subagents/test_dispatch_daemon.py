"""The dispatch pipeline in a real daemon: real agents, real revision runtimes forked by the
zygote, the real router, real LMDB, real signals (issue 12, "Tests that must exist").

Runtimes that must be slow, stall or answer late use an OpenAI-compatible model server on
loopback (tests/providers/protocol_server.py): the one fake allowed, a remote model API.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PATIENCE
from tests.known_secrets import PROVIDER_KEY
from tests.subagents.helpers import (
    SUMMARY_SCHEMA,
    dispatch,
    invocation,
    listed,
    model_server,
    openai,
    runtime_pids,
    start,
    subagent_config,
    timeline,
    write_bundle,
)
from tests.supervisor.harness import Daemon

DaemonFactory = Callable[..., Daemon]


# --- the happy path, and what an agent sees ---------------------------------------------------


def test_an_operator_dispatch_returns_a_schema_valid_result_from_a_forked_runtime(
    root: Path, daemons: DaemonFactory
) -> None:
    write_bundle(root / "subagents", "summarizer")
    daemon = start(daemons, root)
    record = invocation(daemon, "summarizer", "The sky was grey. Then it rained.")
    assert record["state"] == "succeeded", (record, daemon.log())
    assert record["caller"] == "cli" and record["source"] == "cli"
    assert isinstance(record["output"]["summary"], str) and record["output"]["summary"]
    kinds = [e["body"]["kind"] for e in timeline(daemon, record["id"])]
    assert kinds[:2] == ["state", "state"] and kinds[-1] == "state"
    assert [e["seq"] for e in timeline(daemon, record["id"])] == list(range(1, len(kinds) + 1))
    [identity] = runtime_pids(daemon, "summarizer")
    assert identity == f"sub:summarizer@{record['digest'][:12]}"
    status = daemon.status()
    [runtime] = status["runtimes"]  # shown apart from the agents, which it is not one of
    assert (runtime["alias"], runtime["state"]) == (identity, "running")
    assert identity not in {a["alias"] for a in status["agents"]}
    assert "sub-agent runtimes" in daemon.cli("status").stdout


def test_a_reload_rescans_bundles_reports_a_bad_one_and_keeps_the_others(
    root: Path, daemons: DaemonFactory
) -> None:
    write_bundle(root / "subagents", "summarizer")
    daemon = start(daemons, root)
    write_bundle(root / "subagents", "second")
    broken = root / "subagents" / "broken"
    broken.mkdir()
    (broken / "agent.yaml").write_text("id: broken\ndescription: x\nmodel_provider: no.such\n")
    daemon.signal(signal.SIGHUP)
    daemon.wait_notification(lambda m: "READY=1" in m, timeout=PATIENCE)
    listing = json.loads(daemon.cli("subagents", "list", "--json").stdout)
    assert {s["id"] for s in listing["subagents"]} == {"summarizer", "second"}
    [refused] = listing["refused"]
    assert refused["path"].endswith("/broken") and "no.such" in " ".join(refused["problems"])
    assert invocation(daemon, "second", "works")["state"] == "succeeded"


def test_an_agent_dispatches_with_one_tool_call_and_its_caller_is_the_router_identity(
    root: Path, daemons: DaemonFactory
) -> None:
    write_bundle(root / "subagents", "summarizer", callers=("alpha",))
    daemon = start(daemons, root)
    chat = daemon.cli("--agent", "alpha", "chat", "-m", "dispatch summarizer: rain", "--json")
    assert chat.returncode == 0, (chat.stderr, daemon.log())
    [call] = json.loads(chat.stdout)["tool_calls"]
    assert (call["name"], call["ok"]) == ("agent_dispatch", True), call
    [record] = listed(daemon)
    assert (record["caller"], record["source"], record["state"]) == (
        "alpha",
        "agent:alpha",
        "succeeded",
    )
    # beta is not in allowedCallers: it is not even offered the tool, and a call is refused.
    refused = daemon.cli("--agent", "beta", "chat", "-m", "dispatch summarizer: rain", "--json")
    [call] = json.loads(refused.stdout)["tool_calls"]
    assert call["ok"] is False and call["error_code"] in (
        "tool_not_granted",
        "bad_arguments",
        "subagent_caller_not_allowed",
    )
    assert len(listed(daemon)) == 1


def test_the_catalog_shows_ids_and_inputs_never_prompts_skills_or_secrets(
    root: Path, daemons: DaemonFactory
) -> None:
    secret_prompt = "NEVER-SHOW-THIS-PROMPT 7f3a"
    bundle = write_bundle(
        root / "subagents",
        "summarizer",
        callers=("alpha",),
        system=f"{secret_prompt}\n",
        input_schema={"type": "object", "properties": {"material": {"type": "string"}}},
    )
    skill = bundle / "skills" / "method"
    skill.mkdir(parents=True)
    skill_text = "SKILL-BODY-NEVER-SHOWN 91c2"
    (skill / "SKILL.md").write_text(f"---\nname: method\n---\n{skill_text}\n")
    manifest = (bundle / "agent.yaml").read_text() + "skills: [./skills/method]\n"
    (bundle / "agent.yaml").write_text(manifest)
    daemon = start(daemons, root)
    chat = daemon.cli("--agent", "alpha", "chat", "-m", "catalog", "--json")
    assert chat.returncode == 0, (chat.stderr, daemon.log())
    assert "summarizer" in chat.stdout and "material" in chat.stdout
    for hidden in (secret_prompt, skill_text, PROVIDER_KEY):
        assert hidden not in chat.stdout


# --- the pipeline's refusals ------------------------------------------------------------------


def test_a_forged_caller_in_the_body_is_ignored_and_the_router_identity_decides(
    root: Path, daemons: DaemonFactory
) -> None:
    write_bundle(root / "subagents", "summarizer", callers=("alpha",))
    doc = subagent_config(root)
    workspace = root / "state" / "agents" / "beta" / "workspace"
    workspace.mkdir(parents=True)
    plan = {"do": "forged_dispatch", "subagent": "summarizer", "claim": "alpha"}
    (workspace / "plan.json").write_text(json.dumps(plan))
    daemon = daemons(doc).start()  # the fault entry point runs beta's plan on the real bus
    result = workspace / "result.json"
    deadline = time.monotonic() + PATIENCE
    while not result.exists() and time.monotonic() < deadline:
        daemon.next_notification(0.2)
    outcome = json.loads(result.read_text())
    assert (outcome["ok"], outcome["error"]) == (False, "subagent_caller_not_allowed"), outcome
    assert listed(daemon) == []


def test_n_plus_one_concurrent_dispatches_give_exactly_one_concurrency_refusal(
    root: Path, daemons: DaemonFactory
) -> None:
    limit = 2
    gate = root / "gate"
    with model_server("gated", str(gate)) as url:
        write_bundle(
            root / "subagents",
            "slow",
            max_concurrency=limit,
            model_provider="openai.model",
            output_schema=None,
        )
        daemon = start(daemons, root, {"openai": {"model": openai(url)}})
        with concurrent.futures.ThreadPoolExecutor(limit + 1) as pool:
            calls = [pool.submit(dispatch, daemon, "slow", f"task {i}") for i in range(limit + 1)]
            # The model holds every admitted invocation open: the extra one must come back
            # refused while they run, and only then are they let through.
            first, _ = concurrent.futures.wait(calls, return_when="FIRST_COMPLETED", timeout=60)
            gate.touch()
            outcomes = [call.result(timeout=60) for call in calls]
    [refused] = [data for _, data in outcomes if "refusal" in data]
    assert refused["refusal"]["code"] == "subagent_concurrency_limit"
    assert [call.result() for call in first] == [(1, refused)]
    states = sorted(data["invocation"]["state"] for _, data in outcomes if "invocation" in data)
    assert states == ["succeeded"] * limit, (outcomes, daemon.log())
    assert len(listed(daemon)) == limit


def test_an_idempotent_repeat_returns_the_same_invocation_and_runs_nothing_twice(
    root: Path, daemons: DaemonFactory
) -> None:
    write_bundle(root / "subagents", "summarizer")
    daemon = start(daemons, root)
    first = invocation(daemon, "summarizer", "once", "--idempotency-key", "k-1")
    again = invocation(daemon, "summarizer", "once", "--idempotency-key", "k-1")
    other = invocation(daemon, "summarizer", "once", "--idempotency-key", "k-2")
    assert first["id"] == again["id"] != other["id"]
    assert len(listed(daemon)) == 2
    # Counted on the runtime's side: one turn served per invocation that ran.
    served = [
        line
        for line in daemon.log_path.read_text().splitlines()
        if "sub-agent turn" in line and "summarizer" in line
    ]
    assert len(served) == 2, served


# --- the output contract ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "code", "pointer"),
    [
        ('submit: {"summary": ""}', "subagent_output_invalid", "/summary"),
        ('submit: {"summary": "x", "extra": 1}', "subagent_output_invalid", ""),
        ("say: a summary in free text", "subagent_no_result", None),
    ],
)
def test_a_result_outside_the_output_contract_fails_with_its_code(
    root: Path, daemons: DaemonFactory, task: str, code: str, pointer: str | None
) -> None:
    write_bundle(root / "subagents", "summarizer", output_schema=SUMMARY_SCHEMA)
    daemon = start(daemons, root)
    status, data = dispatch(daemon, "summarizer", task)
    record = data["invocation"]
    assert status == 1
    assert (record["state"], record["error_code"]) == ("failed", code), record
    assert record["error_pointer"] == pointer


def test_a_skill_read_outside_the_snapshot_is_refused_at_run_time(
    root: Path, daemons: DaemonFactory
) -> None:
    write_bundle(root / "subagents", "summarizer")
    daemon = start(daemons, root)
    for path in ("../../../zeroclaw.toml", str(root / "zeroclaw.toml")):
        record = invocation(daemon, "summarizer", f"read {path}")
        tools = [e["body"] for e in timeline(daemon, record["id"]) if e["body"]["kind"] == "tool"]
        assert tools and tools[0]["name"] == "skill_read", tools
        assert (tools[0]["ok"], tools[0]["error_code"]) == (
            False,
            "subagent_skill_path_not_allowed",
        )


# --- time: timeout, cancel, restart -------------------------------------------------------------


def test_a_sub_agent_that_never_finishes_times_out_and_its_runtime_serves_the_next(
    root: Path, daemons: DaemonFactory
) -> None:
    with model_server("stall-once") as url:
        write_bundle(
            root / "subagents",
            "sleepy",
            timeout=1.5,
            model_provider="openai.model",
            output_schema=None,
        )
        daemon = start(daemons, root, {"openai": {"model": openai(url)}})
        status, data = dispatch(daemon, "sleepy", "never ends")
        record = data["invocation"]
        assert status == 1
        assert (record["state"], record["error_code"]) == ("timed_out", "subagent_timed_out")
        assert "runtime stopped its turn" in record["error_detail"], record
        following = invocation(daemon, "sleepy", "the next one")
        assert following["state"] == "succeeded", (following, daemon.log())
    [pids] = runtime_pids(daemon, "sleepy").values()
    assert len(pids) == 1  # the same runtime process served both


def test_editing_a_bundle_during_an_invocation_changes_only_the_next_one(
    root: Path, daemons: DaemonFactory
) -> None:
    gate = root / "gate"
    with model_server("gated", str(gate)) as url:
        bundle = write_bundle(
            root / "subagents", "slow", model_provider="openai.model", output_schema=None
        )
        daemon = start(daemons, root, {"openai": {"model": openai(url)}})
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            running = pool.submit(invocation, daemon, "slow", "the old revision")
            deadline = time.monotonic() + PATIENCE
            while not [i for i in listed(daemon) if i["state"] == "running"]:
                assert time.monotonic() < deadline, daemon.log()
                time.sleep(0.05)
            (bundle / "SYSTEM.md").write_text("A new prompt: a new revision.\n")
            assert daemon.cli("reload").returncode == 0
            gate.touch()  # from now on the model answers: the new one, then the old one
            newer = invocation(daemon, "slow", "the new revision")
            older = running.result(timeout=PATIENCE)
    assert older["state"] == newer["state"] == "succeeded", (older, newer)
    assert older["digest"] != newer["digest"]
    revisions = json.loads(daemon.cli("subagents", "revisions", "slow", "--json").stdout)
    assert [r["digest"] for r in revisions["revisions"]] == [older["digest"], newer["digest"]]
    runtimes = runtime_pids(daemon, "slow")
    assert len(runtimes) == 2
    first, second = runtimes.values()
    assert not first & second  # two revisions never share a runtime process


def test_cancel_ends_a_running_invocation_as_cancelled(root: Path, daemons: DaemonFactory) -> None:
    with model_server("stall") as url:
        write_bundle(
            root / "subagents", "sleepy", model_provider="openai.model", output_schema=None
        )
        daemon = start(daemons, root, {"openai": {"model": openai(url)}})
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            running = pool.submit(dispatch, daemon, "sleepy", "forever")
            deadline = time.monotonic() + PATIENCE
            while not (found := [i for i in listed(daemon) if i["state"] == "running"]):
                assert time.monotonic() < deadline, daemon.log()
                time.sleep(0.05)
            cancelled = daemon.cli("invocations", "cancel", found[0]["id"], "--json")
            assert cancelled.returncode == 0, cancelled.stderr
            _, data = running.result(timeout=PATIENCE)
    assert data["invocation"]["state"] == "cancelled"
    assert data["invocation"]["error_code"] == "subagent_cancelled"


def test_a_daemon_killed_mid_invocation_interrupts_it_and_re_runs_a_read_only_one_once(
    root: Path, daemons: DaemonFactory
) -> None:
    with model_server("stall-once") as url, model_server("stall") as stall_url:
        providers = {"openai": {"model": openai(url), "stall": openai(stall_url)}}
        for agent_id, effects, provider in (
            ("reader", "read_only", "openai.model"),
            ("writer", "writes_workspace", "openai.stall"),
        ):
            write_bundle(
                root / "subagents",
                agent_id,
                model_provider=provider,
                output_schema=None,
                effects=effects,
                retry_on_restart=True,
            )
        daemon = start(daemons, root, providers)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            pool.submit(dispatch, daemon, "reader", "read it", "--idempotency-key", "r1")
            pool.submit(dispatch, daemon, "writer", "write it")
            deadline = time.monotonic() + PATIENCE
            while [i["state"] for i in listed(daemon)] != ["running", "running"]:
                assert time.monotonic() < deadline, daemon.log()
                time.sleep(0.05)
            assert daemon.proc is not None
            os.kill(daemon.proc.pid, signal.SIGKILL)
            daemon.proc.wait()
        again = daemons(subagent_config(root) | {"providers": daemon_providers(root, providers)})
        again.start(SUBAGENT_TEST_KEY=PROVIDER_KEY)
        deadline = time.monotonic() + PATIENCE
        while True:
            records = listed(again)
            if len(records) == 3 and records[0]["state"] not in ("accepted", "running"):
                break
            assert time.monotonic() < deadline, (records, again.log())
            time.sleep(0.1)
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for record in reversed(records):  # oldest first
        by_agent.setdefault(record["agent_id"], []).append(record)
    [writer] = by_agent["writer"]
    assert (writer["state"], writer["error_code"]) == ("interrupted", "daemon_restarted")
    assert writer["retried_by"] is None  # writes_workspace: never run twice on its own
    first, retry = by_agent["reader"]
    assert (first["state"], first["error_code"]) == ("interrupted", "daemon_restarted")
    assert (retry["retry_of"], first["retried_by"]) == (first["id"], retry["id"])
    assert (retry["attempt"], retry["state"]) == (2, "succeeded"), (retry, again.log())
    events = timeline(again, retry["id"])
    assert [e["invocation_id"] for e in events] == sorted(
        (e["invocation_id"] for e in events), key=lambda i: i != first["id"]
    )
    states = [e["body"]["state"] for e in events if e["body"]["kind"] == "state"]
    assert states == ["accepted", "running", "interrupted", "accepted", "running", "succeeded"]
    # The same key now names the attempt that ran: a repeat returns it, and runs nothing.
    repeat = invocation(again, "reader", "read it", "--idempotency-key", "r1")
    assert repeat["id"] == retry["id"]
    assert len(listed(again)) == 3


def daemon_providers(root: Path, providers: dict[str, Any]) -> dict[str, Any]:
    doc = subagent_config(root)
    merged: dict[str, Any] = doc["providers"]
    merged.update(providers)
    return merged


# --- a hostile runtime: what the router and the kernel leave it ---------------------------------


def test_a_runtime_cannot_dispatch_reach_memory_or_agents_or_touch_files_outside(
    root: Path, daemons: DaemonFactory
) -> None:
    write_bundle(root / "subagents", "victim", callers=("cli", "alpha"))
    write_bundle(
        root / "subagents",
        "hostile",
        system="HOSTILE-RUNTIME: the fault entry point runs this revision as an attacker\n",
        output_schema=None,
    )
    # The fault entry point (tests/supervisor/fault_agents.py) recognises the revision;
    # every agent and the other runtime are the real ones.
    daemon = daemons(subagent_config(root)).start()
    record = invocation(daemon, "hostile", "try everything")
    assert record["state"] == "succeeded", (record, daemon.log())
    seen = record["output"]
    assert seen["dispatch"] == "unknown_service"  # a sub-agent never dispatches another
    assert seen["memory"] == "unknown_service"
    assert seen["ask_alpha"] == "not_peers"
    assert seen["read_config"] == seen["read_memory"] == "PermissionError"
    assert seen["read_snapshot"] == "opened"
    assert seen["write_snapshot"] == seen["write_tmp"] == "PermissionError"
    # Issue 24 (ADR 0043): a runtime of a root daemon holds no capability, reads no system
    # secret (its uid owns /etc/shadow: only Landlock keeps it out) and signals nothing.
    assert seen["read_shadow"] == "PermissionError"
    assert seen["caps"] == [0, 0, 0]
    # An offline runtime gets no IPv4/IPv6 socket at all: no UDP, no raw socket (attack pass)
    assert (seen["raw_socket"], seen["udp"], seen["io_uring"]) == ("EACCES",) * 3, seen
    assert seen["kill_zygote"] == seen["kill_daemon"] == "EPERM"
    assert [i["agent_id"] for i in listed(daemon)] == ["hostile"]  # victim never ran
