"""`zeroclaw config ...` through a real subprocess: exit codes, output, secrets."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from tests.cli.helpers import run_cli
from tests.conftest import DEMO_CONFIG, VALID_DOC


def write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0 and "zeroclaw, version" in result.stdout


def test_validate_demo_config_exit_0() -> None:
    result = run_cli("config", "validate", DEMO_CONFIG)
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


def test_validate_invalid_exit_2_every_error_no_traceback(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(VALID_DOC))
    doc["agents"]["alpha"]["risk_profile"] = "nope"
    doc["agents"]["beta"]["delegates"] = ["beta"]
    path = write(tmp_path, doc)
    result = run_cli("config", "validate", path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"{path}: agents.alpha.risk_profile: unknown risk profile 'nope'; known: full, sup",
        f"{path}: agents.beta.delegates[0]: an agent cannot delegate to itself",
    ]
    assert "Traceback" not in result.stderr


def test_validate_json_output(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[agents.x]\nenabled = = 1\n")
    result = run_cli("--json", "config", "validate", path)
    assert result.returncode == 2
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1 and data["valid"] is False
    assert data["errors"][0]["line"] == 2


def test_validate_uses_global_config_and_env(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_DOC)
    assert run_cli("--config", path, "config", "validate").returncode == 0
    assert run_cli("config", "validate", env={"ZEROCLAW_CONFIG": str(path)}).returncode == 0


def test_missing_file_exit_2(tmp_path: Path) -> None:
    result = run_cli("config", "validate", tmp_path / "nope.toml")
    assert result.returncode == 2
    assert "file not found" in result.stderr and "config init" in result.stderr


def test_show_json_never_contains_secret_values(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(VALID_DOC))
    doc["providers"]["openai"] = {"cloud": {"model": "gpt", "api_key_env": "ZC_TEST_KEY"}}
    path = write(tmp_path, doc)
    secret = "sk-test-THIS-MUST-NEVER-BE-PRINTED-41f9"
    hook_secret = "hmac-secret-NEVER-PRINTED-77"
    env = {"ZC_TEST_KEY": secret, "HOOK_SECRET": hook_secret}
    for args in (("--json", "config", "show"), ("config", "show", "--json"), ("config", "show")):
        result = run_cli("--config", path, *args, env=env)
        assert result.returncode == 0, result.stderr
        assert secret not in result.stdout + result.stderr
        assert hook_secret not in result.stdout + result.stderr
    data = json.loads(run_cli("--config", path, "config", "show", "--json", env=env).stdout)
    assert data["schema_version"] == 1
    assert data["secrets"] == {"HOOK_SECRET": "set", "ZC_TEST_KEY": "set"}
    assert data["config"]["providers"]["openai"]["cloud"]["api_key_env"] == "ZC_TEST_KEY"
    assert data["resolved"]["agents"]["alpha"]["peers"]["cli.local"]["agents"] == ["beta"]


def test_show_text_is_toml(tmp_path: Path) -> None:
    result = run_cli("--config", DEMO_CONFIG, "config", "show")
    assert result.returncode == 0
    parsed = tomllib.loads(result.stdout)
    assert set(parsed["agents"]) == {"alpha", "beta", "gamma"}


def test_schema_has_descriptions() -> None:
    result = run_cli("config", "schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    agent = schema["$defs"]["AgentConfig"]
    assert agent["additionalProperties"] is False
    assert all("description" in prop for prop in agent["properties"].values())
    for definition in schema["$defs"].values():
        for name, prop in definition.get("properties", {}).items():
            assert prop.get("description"), name


def test_init_writes_valid_config_and_refuses_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "zeroclaw.toml"
    first = run_cli("config", "init", path)
    assert first.returncode == 0, first.stderr
    assert run_cli("config", "validate", path).returncode == 0
    path.write_text("# my edits\n")
    second = run_cli("config", "init", path)
    assert second.returncode == 1 and "--force" in second.stderr
    assert path.read_text() == "# my edits\n"
    forced = run_cli("config", "init", path, "--force")
    assert forced.returncode == 0
    assert run_cli("config", "validate", path).returncode == 0


def test_init_defaults_to_xdg_path(tmp_path: Path) -> None:
    result = run_cli("config", "init", env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "zeroclaw" / "zeroclaw.toml").is_file()


def test_usage_error_exit_2() -> None:
    result = run_cli("config", "validate", "--bogus")
    assert result.returncode == 2


def test_broken_pipe_is_quiet() -> None:
    import subprocess
    import sys

    proc = subprocess.run(
        f"{sys.executable} -m zeroclaw config schema | head -c 10",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


@pytest.mark.parametrize("depth", [20, 5000])
def test_a_deeply_nested_config_is_a_config_error_for_every_command(
    tmp_path: Path, depth: int
) -> None:
    path = tmp_path / "deep.toml"
    path.write_text("x = " + "[" * depth + "]" * depth + "\n")
    for command in (["status"], ["agents", "list"], ["config", "validate"]):
        result = run_cli("--config", path, *command)
        assert result.returncode == 2, (command, result.stderr)
        assert "nested deeper than" in result.stderr
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_config_init_writes_the_state_and_runtime_dirs_the_daemon_will_use(
    tmp_path: Path,
) -> None:
    import tomllib

    from zeroclaw.cli.config_cmd import SYSTEM_RUNTIME_DIR, SYSTEM_STATE_DIR, init_paths
    from zeroclaw.config import SYSTEM_CONFIG, starter_document

    path = tmp_path / "zeroclaw.toml"
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    assert run_cli("config", "init", path, env=env).returncode == 0
    written = tomllib.loads(path.read_text())["daemon"]
    assert written == {
        "state_dir": str(tmp_path / "state" / "zeroclaw"),
        "runtime_dir": str(tmp_path / "run" / "zeroclaw"),
    }
    # The system config gets systemd's directories, whatever the shell's environment.
    assert init_paths(SYSTEM_CONFIG, starter_document(), env) == {
        "state_dir": SYSTEM_STATE_DIR,
        "runtime_dir": SYSTEM_RUNTIME_DIR,
    }
