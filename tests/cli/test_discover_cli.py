"""`zeroclaw discover ...` through the real CLI, on a real project directory."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli
from tests.conftest import PATIENCE
from tests.discovery.helpers import Project

SECRET = "sk-live-DISCOVERY-SECRET-42"


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = Project(tmp_path)
    project.program("codex", 'echo "codex-cli 1.2.3"')
    project.file(
        "adapters/coder.yaml",
        "id: coder\ntransport: cli\ncommand: codex\ncapabilities: [code.review]\n",
    )
    project.file(
        "adapters/broken.yaml",
        "id: broken\ntransport: cli\ncommand: codex\ncapabilities: [code.review]\n"
        f"api_key: {SECRET}\n",
    )
    project.file(
        "adapters/unknown.yaml",
        "id: unknown\ntransport: cli\ncommand: codex\ncapabilities: [x.y]\n",
    )
    project.write_config()
    return project


def discover(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("--config", project.config_path, "discover", *args, env=project.env())


def test_scan_json_has_the_documented_shape(project: Project) -> None:
    result = discover(project, "scan", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert list(out)[:6] == [
        "schema_version",
        "generated_at",
        "workspace",
        "items",
        "summary",
        "sources",
    ]
    assert out["schema_version"] == 1 and out["generated_at"].endswith("Z")
    assert set(out["summary"]) == {"found", "registered", "rejected", "display_only", "shadowed"}
    coder = next(i for i in out["items"] if i["key"] == "cli_adapter:coder")
    assert coder["decision"]["action"] == "registered"
    assert coder["health"]["version"] == "1.2.3"  # only a version token of what it printed


def test_explain_shows_the_decision_first_then_the_facts(project: Project) -> None:
    result = discover(project, "explain", "unknown")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "Decision:"
    assert lines[2:4] == ["  action: rejected", "  reason: capability_unknown"]
    assert "x.y" in result.stdout


def test_explain_of_something_never_found_is_exit_1_with_a_hint(project: Project) -> None:
    result = discover(project, "explain", "code")
    assert result.returncode == 1
    assert "nothing discovered is called 'code'" in result.stderr and "coder" in result.stderr
    failure = json.loads(discover(project, "explain", "code", "--json").stdout)
    assert failure["error"]["code"] == "not_found"


def test_list_filters_and_the_cache_is_used_the_second_time(project: Project) -> None:
    discover(project, "scan")
    registered = json.loads(discover(project, "list", "--registered", "--json").stdout)
    assert {i["id"] for i in registered["items"]} >= {"coder", "codex", "alpha"}
    assert all(i["decision"]["action"] == "registered" for i in registered["items"])
    assert registered["cache"]["used"] is True
    invalid = json.loads(discover(project, "list", "--invalid", "--json").stdout)
    assert {i["id"] for i in invalid["items"]} >= {"broken", "unknown"}


def test_diff_reports_what_changed_since_the_cached_scan(project: Project) -> None:
    discover(project, "scan")
    (project.root / "adapters" / "unknown.yaml").unlink()
    project.file(
        "adapters/new.yaml", "id: new\ntransport: cli\ncommand: codex\ncapabilities: [chat.reply]\n"
    )
    out = json.loads(discover(project, "scan", "--diff", "--json").stdout)
    assert out["diff"]["added"] == ["cli_adapter:new"]
    assert out["diff"]["removed"] == ["cli_adapter:unknown"]
    human = discover(project, "scan", "--diff", "--refresh")
    assert "no change since the cached scan" in human.stdout


def test_a_secret_in_a_manifest_appears_in_no_output(project: Project) -> None:
    outputs = [
        discover(project, *args)
        for args in (
            ("scan", "--json"),
            ("scan", "--explain-invalid"),
            ("list", "--all"),
            ("explain", "broken"),
            ("explain", "broken", "--json"),
            ("audit", "--json"),
            ("doctor", "--json"),
            ("cache", "inspect"),
        )
    ]
    for result in outputs:
        assert SECRET not in result.stdout + result.stderr
    assert "secret-looking key" in outputs[3].stdout
    assert SECRET not in (project.base / "state" / "discovery-cache.json").read_text()


def test_two_concurrent_refreshes_one_gets_cache_locked(project: Project) -> None:
    # The first scan's probe holds the lock until the test has seen the second refused: it
    # waits for a file the test writes (in its own directory, which the probe sandbox lets it
    # read), not for a time a loaded machine may outlast. The probe runs only its program
    # and interpreter: the wait is in-process, not `sleep`.
    release = project.bin / "release"
    project.python_program(
        "codex",
        f"import os, time\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.02)\n"
        "print('codex 1')",
    )
    project.discovery["command_check_timeout_ms"] = 120_000
    project.discovery["global_scan_timeout_ms"] = 240_000
    project.write_config()
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zeroclaw",
            "--config",
            str(project.config_path),
            "discover",
            "scan",
            "--refresh",
        ],
        env={**os.environ, **project.env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lock = project.base / "state" / "discovery-cache.lock"
    deadline = time.monotonic() + PATIENCE
    while not (lock.exists() and lock.read_text().strip() == str(first.pid)):
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.02)
    try:
        second = discover(project, "scan", "--refresh")
    finally:
        release.write_text("")
    _, err = first.communicate(timeout=240)
    assert first.returncode == 0, err
    assert second.returncode == 1
    assert f"pid {first.pid}" in second.stderr
    locked = discover(project, "scan", "--refresh", "--json")
    assert locked.returncode in (0, 1)  # the first scan may be over by now
    dry = discover(project, "scan", "--refresh", "--dry-run")
    assert dry.returncode == 0


def test_doctor_fails_on_a_required_item_that_is_not_registered(project: Project) -> None:
    assert discover(project, "doctor").returncode == 0
    project.file(
        "adapters/needed.yaml",
        "id: needed\ntransport: cli\ncommand: codex\nrequired: true\ncapabilities: [nope.nope]\n",
    )
    result = discover(project, "doctor", "--json")
    assert result.returncode == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["required items"]["status"] == "fail"
    assert "cli_adapter:needed" in checks["required items"]["message"]


def test_audit_lists_each_registered_surface(project: Project) -> None:
    project.extra["agents"] = {
        "alpha": {
            "model_provider": "offline.default",
            "risk_profile": "sup",
            "runtime_profile": "default",
            "channels": ["cli.local"],
            "adapters": ["coder"],
        }
    }
    project.write_config()
    rows = json.loads(discover(project, "audit", "--json").stdout)["rows"]
    alpha = next(r for r in rows if r["kind"] == "agent" and r["id"] == "alpha")
    assert alpha["capabilities"] == ["coder: code.review (none)"]
    coder = next(r for r in rows if r["kind"] == "adapter" and r["id"] == "coder")
    assert coder["callers"] == ["alpha"]
    assert not any(r["id"] == "unknown" for r in rows)


def test_cache_inspect_and_clear(project: Project) -> None:
    discover(project, "scan")
    info = json.loads(discover(project, "cache", "inspect", "--json").stdout)
    assert info["present"] and info["verdict"] == "fresh"
    assert discover(project, "cache", "clear").returncode == 0
    assert json.loads(discover(project, "cache", "inspect", "--json").stdout)["present"] is False


def test_discovery_disabled_is_said_plainly(project: Project) -> None:
    project.discovery["enabled"] = False
    project.write_config()
    result = discover(project, "scan")
    assert result.returncode == 1 and "enabled = false" in result.stderr


def test_schema_prints_a_json_schema(project: Project) -> None:
    schema = json.loads(discover(project, "schema", "adapter").stdout)
    assert schema["properties"]["transport"]["enum"] == ["cli", "http", "mcp", "skill"]


def test_explain_offers_a_loopback_model_server_as_a_provider_to_add(
    project: Project, tmp_path: Path
) -> None:
    served = tmp_path / "served"
    (served / "v1").mkdir(parents=True)
    (served / "v1" / "models").write_text(json.dumps({"data": [{"id": "qwen2.5"}]}))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port), "-d", served],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + PATIENCE
        while not listening(port):
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.05)
        project.discovery["model_servers"] = [f"http://127.0.0.1:{port}/v1"]
        project.write_config()
        result = discover(project, "explain", f"127.0.0.1:{port}")
    finally:
        server.kill()
        server.wait()
    assert result.returncode == 0, result.stderr
    assert "reason: manifest_required" in result.stdout
    assert f'base_url = "http://127.0.0.1:{port}/v1"' in result.stdout
    assert "# models: qwen2.5" in result.stdout


def listening(port: int) -> bool:
    with socket.socket() as client:
        return client.connect_ex(("127.0.0.1", port)) == 0


def test_explain_doctor_and_audit_say_who_may_reach_an_http_adapter(project: Project) -> None:
    project.file(
        "adapters/api.yaml",
        "id: api\ntransport: http\nendpoint: http://127.0.0.1:9/run\napi_key_env: ZC_UNSET_KEY\n"
        "capabilities: [chat.reply]\n",
    )
    agent = {
        "model_provider": "offline.default",
        "runtime_profile": "default",
        "channels": ["cli.local"],
        "adapters": ["api"],
    }
    project.extra["risk_profiles"] = {
        "sup": {"level": "supervised"},
        "net": {"level": "supervised", "allowed_endpoints": ["127.0.0.1:9"]},
    }
    project.extra["agents"] = {
        "alpha": {**agent, "risk_profile": "net"},
        "beta": {**agent, "risk_profile": "sup"},
    }
    project.write_config()
    explained = discover(project, "explain", "api").stdout
    assert "Endpoint: http://127.0.0.1:9/run (127.0.0.1:9)" in explained
    assert "alpha: allowed by risk profile 'net'" in explained
    assert (
        'beta: refused (endpoint_not_allowed): add "127.0.0.1:9" to [risk_profiles.sup] '
        "allowed_endpoints" in explained
    )
    assert "$ZC_UNSET_KEY is not set here" in explained
    doctor = discover(project, "doctor", "--json")
    warned = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "endpoint of api"]
    assert {c["status"] for c in warned} == {"warn"}
    assert any("beta lists api" in c["message"] for c in warned)
    assert any('add "127.0.0.1:9" to [risk_profiles.sup]' in c["fix"] for c in warned)
    assert any("ZC_UNSET_KEY" in c["message"] for c in warned)
    rows = json.loads(discover(project, "audit", "--json").stdout)["rows"]
    api = next(r for r in rows if r["kind"] == "adapter" and r["id"] == "api")
    assert api["endpoints"] == ["POST http://127.0.0.1:9/run"]
    assert api["callers"] == ["alpha", "beta (endpoint not allowed: refused)"]
    assert api["paths"] == [] and api["commands"] == []  # no file, no program of the agent's
    alpha = next(r for r in rows if r["kind"] == "agent" and r["id"] == "alpha")
    assert alpha["endpoints"] == ["127.0.0.1:9"]
    # config validate reads no manifest: what the last scan found (the cache) says it
    assert discover(project, "scan").returncode == 0
    validated = run_cli("--config", project.config_path, "config", "validate", env=project.env())
    assert validated.returncode == 0, validated.stderr
    assert (
        "agents.beta.adapters[0]: adapter 'api' is at 127.0.0.1:9 (as the last discovery scan "
        "found it), which risk profile 'sup' does not list in allowed_endpoints"
    ) in validated.stderr
    assert "agents.alpha" not in validated.stderr
