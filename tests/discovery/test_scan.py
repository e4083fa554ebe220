"""Phase A against real files, real programs on a temporary PATH and a real loopback
server: the seed's validation matrix, row by row, for what a scan decides."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import msgspec
import pytest
import trio

from tests.discovery.helpers import Project, decision

BUNDLE = """
id: {id}
description: test bundle
systemPrompt: SYSTEM.md
model_provider: offline.default
"""


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def bundle(project: Project, ident: str) -> Path:
    project.file(f"subagents/{ident}/agent.yaml", BUNDLE.format(id=ident))
    project.file(f"subagents/{ident}/SYSTEM.md", "You help.\n")
    return project.root / "subagents" / ident


def test_a_valid_bundle_and_the_configured_agents_register(project: Project) -> None:
    bundle(project, "helper")
    snap = project.scan(["agents", "subagents"])
    assert decision(snap, "subagent:helper").action == "registered"
    assert decision(snap, "subagent:helper").target == "subagent_registry"
    assert decision(snap, "agent:alpha").action == "registered"


def test_a_bundle_named_like_an_agent_is_refused_not_a_crash(project: Project) -> None:
    bundle(project, "alpha")
    snap = project.scan(["agents", "subagents"])
    refused = decision(snap, "subagent:alpha")
    assert (refused.action, refused.reason) == ("rejected", "policy_denied")
    assert any("reserved" in d.message for d in refused.diagnostics)


def test_a_bundle_whose_file_leads_out_is_path_not_allowed(project: Project) -> None:
    path = bundle(project, "leaky")
    (project.base / "outside.md").write_text("secret\n")
    (path / "SYSTEM.md").unlink()
    (path / "SYSTEM.md").symlink_to(project.base / "outside.md")
    snap = project.scan(["subagents"])
    assert decision(snap, "subagent:leaky").reason == "path_not_allowed"


def test_an_adapter_manifest_symlinked_from_outside_is_path_not_allowed(project: Project) -> None:
    outside = project.base / "evil.yaml"
    outside.write_text("id: evil\ntransport: cli\ncommand: codex\ncapabilities: [code.review]\n")
    (project.root / "adapters").mkdir()
    (project.root / "adapters" / "evil.yaml").symlink_to(outside)
    snap = project.scan(["adapters"])
    assert decision(snap, "cli_adapter:evil").reason == "path_not_allowed"


def test_a_valid_cli_adapter_registers_with_its_probed_version(project: Project) -> None:
    project.program("codex", 'echo "codex-cli 1.2.3"')
    project.file(
        "adapters/coder.yaml",
        "id: coder\ntransport: cli\ncommand: codex\ncapabilities: [code.review]\n",
    )
    snap = project.scan(["adapters", "capabilities"])
    entry = snap.find("cli_adapter:coder")[0]
    assert entry.decision.action == "registered"
    assert entry.item.health.status == "available"
    assert entry.item.health.version == "1.2.3"  # a version token, nothing else it printed
    assert entry.item.command == os.path.realpath(project.bin / "codex")


def test_schema_errors_say_where_what_was_expected_and_what_was_there(project: Project) -> None:
    project.file(
        "adapters/bad.yaml",
        "id: bad\ntransport: cli\ncommand: codex\ncapabilities: [Not A Capability]\n",
    )
    snap = project.scan(["adapters", "capabilities"])
    refused = decision(snap, "cli_adapter:bad")
    assert refused.reason == "schema_invalid"
    error = next(d for d in refused.diagnostics if d.pointer)
    assert error.pointer == "/capabilities/0"
    assert error.expected.startswith("pattern")
    assert error.actual == "a string of 16 characters"


def test_an_adapter_without_a_capability_or_with_an_unknown_one_is_never_routed(
    project: Project,
) -> None:
    project.program("codex")
    project.file("adapters/none.yaml", "id: none\ntransport: cli\ncommand: codex\n")
    project.file(
        "adapters/odd.yaml",
        "id: odd\ntransport: cli\ncommand: codex\ncapabilities: [github.issue.create]\n",
    )
    snap = project.scan(["adapters", "capabilities"])
    assert decision(snap, "cli_adapter:none").reason == "capability_unknown"
    assert decision(snap, "cli_adapter:odd").reason == "capability_unknown"


def test_a_project_capability_makes_an_adapter_routable(project: Project) -> None:
    project.program("codex")
    project.file(
        "capabilities/github.yaml",
        """
        capabilities:
          - name: github.issue.create
            side_effect: writes_external
            audit: [agent, repo]
        """,
    )
    project.file(
        "adapters/odd.yaml",
        "id: odd\ntransport: cli\ncommand: codex\ncapabilities: [github.issue.create]\n",
    )
    snap = project.scan(["adapters", "capabilities"])
    assert decision(snap, "capability:github.issue.create").action == "registered"
    assert decision(snap, "cli_adapter:odd").action == "registered"


def test_a_whitelisted_command_on_path_is_probed_and_found(project: Project) -> None:
    project.program("codex", 'echo "codex 0.9"')
    snap = project.scan(["path", "capabilities"])
    entry = snap.find("cli_adapter:codex")[0]
    assert entry.decision.action == "registered"
    assert entry.item.source.kind == "path"
    assert entry.item.health.version == "0.9"
    assert entry.item.capabilities == ("repo.analyze", "code.review", "code.generate")


def test_a_program_not_in_the_allowlist_is_never_listed(project: Project) -> None:
    project.program("aider")
    snap = project.scan(["path"])
    assert not snap.find("cli_adapter:aider")


def test_the_same_command_twice_on_path_records_both_and_is_ambiguous(project: Project) -> None:
    first = project.program("codex")
    second = project.program("codex", where=project.base / "bin2")
    snap = project.scan(["path", "capabilities"], PATH=f"{project.bin}:{second.parent}:/bin")
    entry = snap.find("cli_adapter:codex")[0]
    assert [c.display for c in entry.item.candidates] == [str(first), str(second)]
    assert entry.decision.reason == "command_ambiguous"
    assert entry.item.health.status == "not_checked"  # an ambiguous program is not run


def test_a_pin_ends_the_ambiguity(project: Project) -> None:
    project.program("codex")
    second = project.program("codex", where=project.base / "bin2")
    project.discovery["overrides"] = {"codex": {"command_path": str(second)}}
    snap = project.scan(["path", "capabilities"], PATH=f"{project.bin}:{second.parent}:/bin")
    entry = snap.find("cli_adapter:codex")[0]
    assert entry.decision.action == "registered"
    assert entry.item.command == str(second)


def test_a_workspace_local_program_is_ignored_unless_pinned(project: Project) -> None:
    local = project.program("codex", where=project.root / "tools")
    snap = project.scan(["path", "capabilities"], PATH=f"{local.parent}:/bin")
    assert decision(snap, "cli_adapter:codex").reason == "path_not_allowed"


def test_a_probe_that_hangs_times_out_while_other_sources_finish(project: Project) -> None:
    project.python_program("codex", "import time\ntime.sleep(30)")
    project.discovery["command_check_timeout_ms"] = 300
    bundle(project, "helper")
    snap = project.scan(["path", "subagents", "capabilities"])
    entry = snap.find("cli_adapter:codex")[0]
    assert entry.item.health.status == "unavailable"
    assert any(d.kind == "command_timeout" for d in entry.decision.diagnostics)
    assert entry.decision.reason == "health_unavailable"
    assert decision(snap, "subagent:helper").action == "registered"


def test_a_probe_printing_10_mb_is_cut_and_flagged(project: Project) -> None:
    project.python_program(
        "codex", "import sys\nprint('codex 1.0')\nsys.stdout.write('x' * 10485760)"
    )
    snap = project.scan(["path", "capabilities"])
    entry = snap.find("cli_adapter:codex")[0]
    assert any(d.kind == "output_too_large" for d in entry.item.diagnostics)
    assert entry.item.health.version == "1.0"
    assert len(msgspec.json.encode(entry)) < 10_000


def test_a_global_timeout_keeps_partial_results_and_reports_the_source(project: Project) -> None:
    project.python_program("codex", "import time\ntime.sleep(30)")
    project.discovery.update(global_scan_timeout_ms=400, command_check_timeout_ms=60_000)
    snap = project.scan(["path", "agents"])
    report = {r.name: r for r in snap.sources}
    assert report["path"].status == "timeout"
    assert report["agents"].status == "ok"
    assert snap.find("cli_adapter:codex")  # found before the probe was cut off


def test_mcp_manifests_keep_their_allowlists_and_foreign_ones_expose_nothing(
    project: Project,
) -> None:
    project.file(
        "mcp/github.yaml",
        "id: github\ntransport: stdio\ncommand: gh-mcp\n"
        "tools: [issues.list]\nenv: [GITHUB_TOKEN]\n",
    )
    project.file(
        "mcp/claude.json",
        json.dumps({"mcpServers": {"files": {"command": "fs-mcp", "env": {"API_TOKEN": "t0p"}}}}),
    )
    project.file("mcp/codex.toml", '[mcp_servers.search]\ncommand = "search-mcp"\n')
    snap = project.scan(["mcp", "capabilities"])
    github = snap.find("mcp_server:github")[0]
    assert github.item.allowlists == {"tools": ("issues.list",)}
    assert github.item.capabilities == ("mcp.tool.call",)
    files = snap.find("mcp_server:files")[0]
    assert files.item.allowlists == {} and files.item.env == ("API_TOKEN",)
    assert snap.find("mcp_server:search")
    assert "t0p" not in msgspec.json.encode(snap).decode()


def test_mcp_servers_in_user_directories_are_shown_only(project: Project) -> None:
    path = project.home / ".config" / "zeroclaw" / "mcp" / "x.yaml"
    path.parent.mkdir(parents=True)
    path.write_text("id: x\ntransport: stdio\ncommand: x-mcp\ntools: [a]\n")
    snap = project.scan(["user_skills", "capabilities"])
    entry = decision(snap, "mcp_server:x")
    assert (entry.target, entry.reason) == ("display_only", "policy_denied")


def skill(project: Project, name: str, front: str, where: str = ".codex/skills") -> None:
    path = project.home / where / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}\n---\nDo the thing.\n" if front else "Do the thing.\n")


def test_user_skills_are_classified_and_shown_only_by_default(project: Project) -> None:
    full = "kind: workflow_skill\ninput_schema: in.json\noutput_schema: out.json\n"
    full += "capabilities: [workflow.code_review]"
    skill(project, "review", full)
    skill(project, "noschema", "kind: workflow_skill\ncapabilities: [workflow.code_review]")
    skill(project, "team-worker", "")
    skill(project, "guess", "", where=".agents/skills")
    (project.home / ".codex" / "prompts").mkdir(parents=True)
    (project.home / ".codex" / "prompts" / "architect.md").write_text("You are...\n")
    snap = project.scan(["user_skills", "capabilities"])
    assert decision(snap, "workflow_skill:review").reason == "policy_denied"
    assert decision(snap, "runtime_worker:team-worker").target == "display_only"
    assert decision(snap, "workflow_skill:guess").reason == "policy_denied"
    assert decision(snap, "prompt_role:architect").target == "display_only"

    project.discovery["allow_user_local_skills"] = True
    snap = project.scan(["user_skills", "capabilities"])
    assert decision(snap, "workflow_skill:review").action == "registered"
    assert decision(snap, "workflow_skill:noschema").reason == "capability_missing_schema"
    assert decision(snap, "runtime_worker:team-worker").reason == "runtime_gate_mismatch"
    assert decision(snap, "workflow_skill:guess").reason == "manifest_required"


def test_user_directories_are_not_read_when_scan_user_dirs_is_off(project: Project) -> None:
    skill(project, "review", "kind: workflow_skill")
    project.discovery["scan_user_dirs"] = False
    assert not project.scan(["user_skills"]).entries


def test_a_manifest_with_a_secret_is_redacted_in_every_output(project: Project) -> None:
    project.file(
        "adapters/leak.yaml",
        "id: leak\ntransport: http\nendpoint: https://api.example.test\n"
        "api_key: sk-live-TOPSECRET\ncapabilities: [chat.reply]\n",
    )
    snap = project.scan(["adapters", "capabilities"])
    text = msgspec.json.encode(snap).decode()
    assert "TOPSECRET" not in text
    entry = decision(snap, "http_adapter:leak")
    assert any(d.kind == "secret_redacted" for d in entry.diagnostics)


def test_a_duplicate_adapter_id_shadows_and_names_the_winner(project: Project) -> None:
    project.program("codex")
    project.file(
        "adapters/a.yaml",
        "id: codex\ntransport: cli\ncommand: codex\ncapabilities: [code.review]\n",
    )
    snap = project.scan(["adapters", "path", "capabilities"])
    path_decision = next(
        e.decision
        for e in snap.entries
        if e.item.key == "cli_adapter:codex" and e.item.source.kind == "path"
    )
    assert path_decision.action == "shadowed"
    assert "adapters/a.yaml" in path_decision.shadowed_by


def test_a_serial_channel_port_is_authorized_and_an_unnamed_one_only_observed(
    project: Project,
) -> None:
    named_master, named = os.openpty()
    other_master, other = os.openpty()
    try:
        named_path = os.ttyname(named)
        other_path = os.ttyname(other)
        project.extra["channels"] = {
            "cli": {"local": {}},
            "serial": {"dev": {"port": named_path}},
        }
        project.extra["agents"] = {
            "alpha": {
                "model_provider": "offline.default",
                "risk_profile": "sup",
                "runtime_profile": "default",
                "channels": ["cli.local", "serial.dev"],
            }
        }
        snap = project.scan(["serial"])
        assert snap.find(named_path)[0].item.device_state == "authorized"
        assert not snap.find(other_path) or snap.find(other_path)[0].item.device_state == (
            "observed"
        )
        assert decision(snap, f"serial_device:{named_path}").target == "display_only"
    finally:
        for fd in (named_master, named, other_master, other):
            os.close(fd)


async def _serve_models(listener: trio.SocketListener, body: bytes) -> None:
    async def handle(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        head = (
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        await stream.send_all(head.encode() + body)
        await stream.aclose()

    await trio.serve_listeners(handle, [listener])


def test_a_loopback_openai_compatible_server_is_offered_as_a_provider(project: Project) -> None:
    from zeroclaw.config import load_config
    from zeroclaw.discovery import scan, scan_context

    body = json.dumps({"data": [{"id": "qwen2.5"}, {"id": "llama3"}]}).encode()

    async def main() -> None:
        sock = trio.socket.socket()
        await sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        listener = trio.SocketListener(sock)
        project.discovery["model_servers"] = [f"http://127.0.0.1:{port}/v1"]
        config = load_config(project.write_config())
        ctx = scan_context(config, project.config_path, project.env())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_serve_models, listener, body)
            snap = await scan(ctx, ["model_servers"])
            nursery.cancel_scope.cancel()
        entry = snap.find(f"127.0.0.1:{port}")[0]
        assert entry.item.kind == "local_model"
        assert entry.item.name == "qwen2.5, llama3"
        assert entry.decision.target == "display_only"
        assert "provider candidate" in entry.decision.diagnostics[0].message

    trio.run(main)


def test_a_configured_model_server_that_is_down_says_so(project: Project) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    project.discovery["model_servers"] = [f"http://127.0.0.1:{port}"]
    snap = project.scan(["model_servers"])
    assert snap.find(f"127.0.0.1:{port}")[0].item.health.status == "unavailable"


def test_a_usual_model_port_is_asked_over_http_only_when_it_accepts() -> None:
    """The pre-check of the usual model-server ports (ADR 0067): a port nothing listens on
    refuses the connect, and no HTTP client is built for it."""
    from zeroclaw.discovery._health import _accepts

    async def main() -> list[bool]:
        sock = trio.socket.socket()
        await sock.bind(("127.0.0.1", 0))
        sock.listen()
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            free = closed.getsockname()[1]
        listening = [False, False]
        await _accepts(f"http://127.0.0.1:{sock.getsockname()[1]}/v1/models", listening, 0)
        await _accepts(f"http://127.0.0.1:{free}/api/tags", listening, 1)
        sock.close()
        return listening

    assert trio.run(main) == [True, False]


def test_an_explicit_skill_manifest_classifies_and_registers_a_user_skill(
    project: Project,
) -> None:
    skill(project, "review-worker", "")  # a heuristic would call it a runtime worker
    project.file(
        "adapters/review-worker.yaml",
        "id: review-worker\ntransport: skill\nskill_kind: workflow_skill\n"
        "input_schema: in.json\noutput_schema: out.json\ncapabilities: [workflow.code_review]\n",
    )
    snap = project.scan(["adapters", "user_skills", "capabilities"])
    registered = [e for e in snap.find("workflow_skill:review-worker") if e.decision.registered]
    assert [e.item.source.kind for e in registered] == ["project_manifest"]
    user = next(
        e for e in snap.find("workflow_skill:review-worker") if e.item.source.kind == "user_dir"
    )
    assert user.decision.action == "shadowed" and "adapters/review-worker.yaml" in (
        user.decision.shadowed_by
    )
    assert not snap.find("runtime_worker:review-worker")


def test_a_skill_manifest_whose_skill_is_missing_is_not_registered(project: Project) -> None:
    project.file(
        "adapters/ghost.yaml",
        "id: ghost\ntransport: skill\nskill_kind: workflow_skill\n"
        "input_schema: in.json\noutput_schema: out.json\ncapabilities: [workflow.code_review]\n",
    )
    snap = project.scan(["adapters", "user_skills", "capabilities"])
    refused = decision(snap, "workflow_skill:ghost")
    assert refused.reason == "health_unavailable"
    assert any("no skill 'ghost'" in d.message for d in refused.diagnostics)
