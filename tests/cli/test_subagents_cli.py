"""`zeroclaw subagents`, `dispatch` and `invocations` against a real daemon whose
`[subagents] dir` holds real bundles (copies of etc/subagents), with the offline provider.

Listings carry `schema_version` and never a prompt's text; an operator's dispatch is made as
`cli` and waits for its end; refusals keep their codes and exit codes (2: unknown id or bad
input, 1: caller not allowed); an idempotency key makes a repeat return the same
invocation; without a daemon every one of these commands exits 3.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import trio
from jsonschema import Draft202012Validator

from tests.cli.helpers import run_cli
from tests.conftest import PATIENCE
from tests.supervisor.harness import Daemon, agent_entry, make_config

EXAMPLES = Path(__file__).resolve().parents[2] / "etc" / "subagents"
DaemonFactory = Callable[..., Daemon]


def with_bundles(root: Path) -> dict[str, Any]:
    """A config with one agent and three bundles: summarizer (cli allowed, output schema),
    content-analyst (cli allowed, input schema), private (only alpha may call it), and one
    refused bundle."""
    bundles = root / "subagents"
    shutil.copytree(EXAMPLES / "summarizer", bundles / "summarizer")
    shutil.copytree(EXAMPLES / "content-analyst", bundles / "content-analyst")
    private = bundles / "private"
    shutil.copytree(EXAMPLES / "summarizer", private)
    manifest = (private / "agent.yaml").read_text()
    manifest = manifest.replace("id: summarizer", "id: private")
    manifest = manifest.replace("allowedCallers: [alpha, beta, cli]", "allowedCallers: [alpha]")
    (private / "agent.yaml").write_text(manifest)
    broken = bundles / "broken"
    broken.mkdir()
    (broken / "agent.yaml").write_text("id: broken\ndescription: x\nmodel_provider: nope.none\n")
    doc = make_config(root, {"alpha": agent_entry()})
    doc["subagents"] = {"dir": str(bundles)}
    return doc


@pytest.fixture
def daemon(root: Path, daemons: DaemonFactory) -> Daemon:
    return daemons(with_bundles(root), faults=False).start()


def ok_json(daemon: Daemon, *args: str) -> Any:
    result = daemon.cli(*args, "--json")
    assert result.returncode == 0, (args, result.stdout, result.stderr, daemon.log())
    return json.loads(result.stdout)


def system_md(name: str) -> str:
    return (EXAMPLES / name / "SYSTEM.md").read_text().strip()


def test_listings_show_manifests_and_revisions_never_a_prompt(daemon: Daemon) -> None:
    listing = daemon.cli("subagents", "list", "--json")
    assert listing.returncode == 0, listing.stderr
    data = json.loads(listing.stdout)
    assert data["schema_version"] == 1
    by_id = {s["id"]: s for s in data["subagents"]}
    assert set(by_id) == {"content-analyst", "private", "summarizer"}
    summarizer = by_id["summarizer"]
    assert summarizer["allowedCallers"] == ["alpha", "beta", "cli"]
    assert (summarizer["effects"], summarizer["maxConcurrency"]) == ("none", 8)
    assert len(summarizer["digest"]) == 64
    (refused,) = data["refused"]
    assert refused["path"].endswith("/broken") and refused["problems"]

    show = daemon.cli("subagents", "show", "content-analyst", "--json")
    assert show.returncode == 0, show.stderr
    detail = json.loads(show.stdout)
    assert detail["schema_version"] == 1
    assert detail["digest"] == by_id["content-analyst"]["digest"]
    assert detail["skills"] == ["analysis-method"]
    assert detail["policy"]["allowedCallers"] == ["alpha", "cli"]
    assert detail["effects"] == "read_only" and detail["retry_on_restart"] is True
    assert detail["identity"].startswith("sub:content-analyst@")
    assert detail["snapshot"].endswith(detail["digest"])
    assert detail["input_schema"]["required"] == ["material"]
    skill = (EXAMPLES / "content-analyst" / "skills" / "analysis-method" / "SKILL.md").read_text()
    for output in (listing.stdout, show.stdout):
        assert system_md("content-analyst") not in output
        assert system_md("summarizer") not in output
        assert skill.split("---")[-1].strip()[:40] not in output

    revisions = ok_json(daemon, "subagents", "revisions", "summarizer")
    assert revisions["schema_version"] == 1
    (revision,) = revisions["revisions"]
    assert revision["digest"] == summarizer["digest"] and revision["current"] is True

    table = daemon.cli("subagents", "list")
    assert table.returncode == 0 and "summarizer" in table.stdout and "broken" in table.stdout
    human = daemon.cli("subagents", "show", "summarizer")
    assert human.returncode == 0 and summarizer["digest"] in human.stdout

    for command in ("show", "revisions"):
        unknown = daemon.cli("subagents", command, "nope")
        assert unknown.returncode == 2, unknown.stderr
        assert "subagent_not_found" in unknown.stderr


def test_a_dispatch_waits_for_a_schema_valid_result_and_its_record_stays(
    daemon: Daemon,
) -> None:
    result = daemon.cli(
        "dispatch", "summarizer", "--task", "The sky was grey. Then it rained.", "--json"
    )
    assert result.returncode == 0, (result.stdout, result.stderr, daemon.log())
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1
    invocation = data["invocation"]
    assert invocation["state"] == "succeeded"
    assert (invocation["caller"], invocation["source"]) == ("cli", "cli")
    schema = json.loads((EXAMPLES / "summarizer" / "schemas" / "output.json").read_text())
    Draft202012Validator(schema).validate(invocation["output"])
    assert invocation["error_code"] is None

    listed = ok_json(daemon, "invocations", "list")
    assert listed["schema_version"] == 1
    assert [i["id"] for i in listed["invocations"]] == [invocation["id"]]
    for flags in (["--agent", "summarizer"], ["--state", "succeeded"]):
        assert len(ok_json(daemon, "invocations", "list", *flags)["invocations"]) == 1
    for flags in (["--agent", "content-analyst"], ["--state", "failed"]):
        assert ok_json(daemon, "invocations", "list", *flags)["invocations"] == []

    shown = ok_json(daemon, "invocations", "show", invocation["id"])
    assert shown["schema_version"] == 1 and shown["invocation"] == invocation

    for follow in ([], ["--follow"]):
        events = daemon.cli("invocations", "events", invocation["id"], *follow, "--json")
        assert events.returncode == 0, events.stderr
        lines = [json.loads(line) for line in events.stdout.splitlines()]
        assert all(e["schema_version"] == 1 for e in lines)
        assert [e["seq"] for e in lines] == list(range(1, len(lines) + 1))
        states = [e["body"]["state"] for e in lines if e["body"]["kind"] == "state"]
        assert states[0] == "accepted" and states[-1] == "succeeded"
        assert lines[-1]["seq"] == invocation["last_seq"]
    human = daemon.cli("invocations", "events", invocation["id"])
    assert human.returncode == 0 and "succeeded" in human.stdout

    cancel = ok_json(daemon, "invocations", "cancel", invocation["id"])
    assert cancel["invocation"]["state"] == "succeeded"
    assert ok_json(daemon, "invocations", "show", invocation["id"])["invocation"] == invocation

    for command in ("show", "events", "cancel"):
        unknown = daemon.cli("invocations", command, "no-such-invocation")
        assert unknown.returncode == 1, unknown.stderr
        assert "invocation_not_found" in unknown.stderr


def test_a_repeat_with_the_same_idempotency_key_returns_the_same_invocation(
    daemon: Daemon,
) -> None:
    args = ("dispatch", "summarizer", "--task", "Say it once.", "--idempotency-key", "k-1")
    first = ok_json(daemon, *args)["invocation"]
    again = ok_json(daemon, *args)["invocation"]
    assert again["id"] == first["id"] and again["idempotency_key"] == "k-1"
    other = ok_json(daemon, "dispatch", "summarizer", "--task", "Say it once.")["invocation"]
    assert other["id"] != first["id"]
    assert len(ok_json(daemon, "invocations", "list")["invocations"]) == 2


def test_refused_dispatches_keep_their_codes_and_exit_codes(daemon: Daemon, tmp_path: Path) -> None:
    unknown = daemon.cli("dispatch", "nope", "--task", "t", "--json")
    assert unknown.returncode == 2, unknown.stderr
    assert json.loads(unknown.stdout)["refusal"]["code"] == "subagent_not_found"
    assert "subagent_not_found" in unknown.stderr

    private = daemon.cli("dispatch", "private", "--task", "t", "--json")
    assert private.returncode == 1, private.stderr
    refusal = json.loads(private.stdout)["refusal"]
    assert refusal["code"] == "subagent_caller_not_allowed"
    assert json.loads(private.stdout)["error"] == "subagent_caller_not_allowed"

    bad = tmp_path / "input.json"
    bad.write_text(json.dumps({"material": 42}))
    invalid = daemon.cli(
        "dispatch", "content-analyst", "--task", "t", "--input", f"@{bad}", "--json"
    )
    assert invalid.returncode == 2, invalid.stderr
    refusal = json.loads(invalid.stdout)["refusal"]
    assert (refusal["code"], refusal["pointer"]) == ("subagent_input_invalid", "/material")
    human = daemon.cli("dispatch", "content-analyst", "--task", "t", "--input", '{"x": 1}')
    assert human.returncode == 2 and "subagent_input_invalid" in human.stderr

    assert ok_json(daemon, "invocations", "list")["invocations"] == []

    good = daemon.cli(
        "dispatch", "content-analyst", "--task", "analyse", "--input", '{"material": "a b c"}'
    )
    assert good.returncode == 0, (good.stdout, good.stderr, daemon.log())
    assert "succeeded" in good.stdout


# --- without a daemon: nothing to ask, and bad input is refused before asking -----------------


COMMANDS = [
    ("subagents", "list"),
    ("subagents", "show", "summarizer"),
    ("subagents", "revisions", "summarizer"),
    ("dispatch", "summarizer", "--task", "t"),
    ("invocations", "list"),
    ("invocations", "show", "x"),
    ("invocations", "events", "x", "--follow"),
    ("invocations", "cancel", "x"),
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_without_a_daemon_every_command_exits_3(root: Path, args: tuple[str, ...]) -> None:
    config = root / "zeroclaw.toml"
    config.write_text(tomli_w.dumps(make_config(root, {"alpha": agent_entry()})))
    result = run_cli("--config", config, *args)
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert "no zeroclaw daemon" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("value", "message"),
    [("{not json", "not JSON"), ("@/no/such/file.json", "cannot read")],
)
def test_bad_input_is_a_usage_error_before_the_daemon_is_asked(
    root: Path, value: str, message: str
) -> None:
    """No daemon runs here: exit 2 (not 3) shows the input was judged first."""
    config = root / "zeroclaw.toml"
    config.write_text(tomli_w.dumps(make_config(root, {"alpha": agent_entry()})))
    result = run_cli("--config", config, "dispatch", "summarizer", "--task", "t", "--input", value)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr


# --- the CLI over a real control socket, served by the handlers with an in-test API ----------
# Runs today: the handlers (zeroclaw.subagents) behind a real ControlServer on the daemon's
# socket name, the API a small one over real bundles (tests/subagents/test_control.py); the
# tests above pin the same surfaces against the daemon's own API.


def _spawn(*argv: str) -> subprocess.Popen[str]:
    """A CLI process whose output is read as it comes (a follower)."""
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def test_the_cli_speaks_the_sub_agent_commands_over_the_control_socket(
    root: Path, tmp_path: Path
) -> None:
    from tests.subagents.test_control import SECRET_PROMPT, SECRET_SKILL, make_api
    from zeroclaw.control import CommandTable
    from zeroclaw.subagents import register_subagent_commands
    from zeroclaw.supervisor._control_server import ControlServer, bind_control_socket
    from zeroclaw.turns import InvocationEvent, StateEntered, TextDelta

    api = make_api(tmp_path)
    config = root / "zeroclaw.toml"
    config.write_text(tomli_w.dumps(make_config(root, {"alpha": agent_entry()})))
    table = register_subagent_commands(CommandTable(), api)
    server = ControlServer(
        bind_control_socket(root / "run"), table.dispatch, zygote_pid=-1, daemon_pid=-1
    )
    # The CLI talks only to the lock's holder (the daemon writes its pid there first).
    (root / "run").mkdir(parents=True, exist_ok=True)
    (root / "run" / "zeroclaw.lock").write_text(f"{os.getpid()}\n")

    async def cli(*args: str | Path) -> Any:
        return await trio.to_thread.run_sync(lambda: run_cli("--config", config, *args))

    async def ok(*args: str) -> Any:
        result = await cli(*args, "--json")
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return json.loads(result.stdout)

    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)

        listing = await ok("subagents", "list")
        assert listing["schema_version"] == 1
        assert [s["id"] for s in listing["subagents"]] == ["open-one", "private", "summarizer"]
        assert listing["refused"][0]["path"].endswith("/broken")
        shown = await cli("subagents", "show", "open-one", "--json")
        assert json.loads(shown.stdout)["skills"] == ["method"]
        human = await cli("subagents", "show", "open-one")
        for out in (listing, shown.stdout, human.stdout):
            assert SECRET_PROMPT not in str(out) and SECRET_SKILL not in str(out)
        revisions = await ok("subagents", "revisions", "open-one")
        assert [r["current"] for r in revisions["revisions"]] == [False, True]
        assert (await cli("subagents", "revisions", "nope")).returncode == 2

        done = await ok("dispatch", "summarizer", "--task", "grey sky", "--idempotency-key", "k")
        invocation = done["invocation"]
        assert (invocation["state"], invocation["output"]) == ("succeeded", {"summary": "grey sky"})
        assert (invocation["caller"], invocation["source"]) == ("cli", "cli")
        again = await ok("dispatch", "summarizer", "--task", "grey sky", "--idempotency-key", "k")
        assert again["invocation"]["id"] == invocation["id"]

        failed = await cli("dispatch", "summarizer", "--task", "fail")
        assert failed.returncode == 1, failed.stderr
        assert "subagent_output_invalid: 42 is not of type 'string' (at /summary)" in failed.stdout

        refusals = {
            ("open-one", '{"text": 1}'): (2, "subagent_input_invalid", "/text"),
            ("private", "{}"): (1, "subagent_caller_not_allowed", None),
            ("nope", "{}"): (2, "subagent_not_found", None),
        }
        for (agent_id, value), (code, error, pointer) in refusals.items():
            refused = await cli("dispatch", agent_id, "--task", "t", "--input", value, "--json")
            assert refused.returncode == code, refused.stderr
            assert json.loads(refused.stdout)["refusal"]["pointer"] == pointer
            assert json.loads(refused.stdout)["error"] == error and error in refused.stderr

        listed = await ok("invocations", "list", "--state", "failed")
        assert [i["task"] for i in listed["invocations"]] == ["fail"]
        table_out = await cli("invocations", "list")
        assert (
            invocation["id"] in table_out.stdout and "subagent_output_invalid" in table_out.stdout
        )
        events = await cli("invocations", "events", invocation["id"], "--json")
        seqs = [json.loads(line)["seq"] for line in events.stdout.splitlines()]
        assert seqs == [1, 2, 3, 4]
        cancel = await ok("invocations", "cancel", invocation["id"])
        assert cancel["invocation"]["state"] == "succeeded"
        assert (await cli("invocations", "show", "nope")).returncode == 1

        # --follow: the timeline so far, then each event as it is persisted, to the end.
        running = api.add("open-one", "running")
        argv = [sys.executable, "-m", "zeroclaw", "--config", str(config)]
        follower = _spawn(*argv, "invocations", "events", running.id, "--follow", "--json")
        try:
            with trio.fail_after(PATIENCE):  # a stuck follower fails the test, never hangs it
                assert follower.stdout is not None
                for _ in range(2):  # accepted, running: it has subscribed by now
                    await trio.to_thread.run_sync(follower.stdout.readline, abandon_on_cancel=True)
                await api.persist(InvocationEvent(running.id, 3, 3.0, TextDelta("hi")))
                line = json.loads(
                    await trio.to_thread.run_sync(follower.stdout.readline, abandon_on_cancel=True)
                )
                assert (line["seq"], line["body"]) == (3, {"kind": "delta", "text": "hi"})
                await api.persist(InvocationEvent(running.id, 4, 4.0, StateEntered("succeeded")))
                rest, err = await trio.to_thread.run_sync(
                    follower.communicate, abandon_on_cancel=True
                )
                assert follower.returncode == 0, err
                assert [json.loads(x)["seq"] for x in rest.splitlines()] == [4]
        finally:
            follower.kill()
        nursery.cancel_scope.cancel()
