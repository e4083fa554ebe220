"""Every `--json` failure is one JSON document on stdout, `{schema_version, ok: false, error:
{code, message}}`, with the exit code the same command has without --json (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from tests.cli.helpers import run_cli
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.cli import cli
from zeroclaw.cli._app import json_in_args

# (command words, exit code, error code); CONFIG / MISSING / BROKEN are filled in per test.
CASES: list[tuple[tuple[str, ...], int, str]] = [
    (("--config", "CONFIG", "status", "--bogus"), 2, "usage"),
    (("--bogus", "--config", "CONFIG", "status"), 2, "usage"),
    (("--config", "CONFIG", "agents", "restart"), 2, "usage"),
    (("--config", "CONFIG", "memory", "list", "-a", "alpha", "--since", "soon"), 2, "usage"),
    (("--config", "CONFIG", "memory", "purge", "-a", "alpha"), 2, "usage"),
    (("--config", "CONFIG", "memory", "get", "k"), 2, "usage"),  # no agent
    (("--config", "MISSING", "agents", "list"), 2, "config_not_found"),
    (("--config", "BROKEN", "route", "explain", "--from", "a", "--to", "b"), 2, "config_invalid"),
    (("--config", "CONFIG", "subagents", "list"), 3, "daemon_unreachable"),
    (("--config", "CONFIG", "agents", "stop", "alpha"), 3, "daemon_unreachable"),
    (("--config", "CONFIG", "config", "init", "CONFIG"), 1, "failed"),  # exists, no --force
    (("--config", "NOKEY", "-a", "alpha", "chat", "-m", "hi"), 1, "provider_unavailable"),
]


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "zeroclaw.toml"
    config.write_text(tomli_w.dumps(make_config(tmp_path, {"alpha": agent_entry()})))
    broken = tmp_path / "broken.toml"
    broken.write_text("[daemon\n")
    nokey: dict[str, Any] = make_config(tmp_path, {"alpha": agent_entry()})
    nokey["providers"]["openai"] = {"main": {"api_key_env": "ZC_TEST_UNSET_KEY", "model": "m"}}
    nokey["agents"]["alpha"]["model_provider"] = "openai.main"
    nokey_path = tmp_path / "nokey.toml"
    nokey_path.write_text(tomli_w.dumps(nokey))
    return {
        "CONFIG": str(config),
        "MISSING": str(tmp_path / "missing.toml"),
        "BROKEN": str(broken),
        "NOKEY": str(nokey_path),
    }


@pytest.mark.parametrize(("words", "exit_code", "code"), CASES, ids=lambda v: str(v))
def test_a_failure_with_json_is_one_json_error_with_the_same_exit_code(
    paths: dict[str, str], words: tuple[str, ...], exit_code: int, code: str
) -> None:
    args = [paths.get(w, w) for w in words]
    plain = run_cli(*args, env={"ZC_TEST_UNSET_KEY": ""})
    assert plain.returncode == exit_code, plain.stderr
    assert not plain.stdout.lstrip().startswith("{"), plain.stdout
    # --json at the end: after every other word, whatever failed before it was read.
    as_json = run_cli(*args, "--json", env={"ZC_TEST_UNSET_KEY": ""})
    assert as_json.returncode == exit_code, as_json.stderr
    document = json.loads(as_json.stdout)  # exactly one document
    assert document["schema_version"] == 1 and document["ok"] is False, document
    assert document["error"]["code"] == code, document
    assert document["error"]["message"], document
    assert as_json.stderr.strip(), "the human message stays on stderr"


def test_json_before_the_command_is_the_same(paths: dict[str, str]) -> None:
    result = run_cli("--json", "--config", paths["MISSING"], "status")
    assert result.returncode == 2
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "config_not_found"
    assert error["issues"][0]["message"].startswith("file not found")


def test_a_command_that_prints_its_own_json_is_not_followed_by_a_second(
    paths: dict[str, str],
) -> None:
    """`config validate --json` reports an invalid file itself (valid: false): one document."""
    result = run_cli("config", "validate", paths["BROKEN"], "--json")
    assert result.returncode == 2
    document = json.loads(result.stdout)
    assert (document["ok"], document["valid"]) == (False, False)
    assert document["error"]["code"] == "config_invalid"


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["status", "--json"], True),
        (["--json", "status", "--bogus"], True),
        (["--config", "--json", "status"], False),  # the value of --config
        (["--config=x.toml", "status", "--json"], True),
        (["-a", "alpha", "chat", "-m", "--json"], False),  # the message
        (["chat", "-m--json"], False),
        (["memory", "list", "-a", "--json"], False),
        (["memory", "list", "--", "--json"], False),
        (["memory", "--json", "list"], True),
        (["dispatch", "x", "--task", "--json"], False),
    ],
)
def test_json_is_read_from_the_raw_arguments_as_click_would(args: list[str], wanted: bool) -> None:
    """A usage error stops click before a later --json is read: the boundary reads the raw
    words with the tree's option metadata, never taking an option's value for the flag."""
    assert json_in_args(cli, args) is wanted
