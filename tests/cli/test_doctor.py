"""`zeroclaw doctor`: pure checks over gathered facts, and the real command's output."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from tests.cli.helpers import run_cli
from tests.conftest import VALID_DOC
from zeroclaw.cli.doctor_cmd import UNCONFINED, Facts, run_checks
from zeroclaw.config import load_config_text
from zeroclaw.policy import abi_version


def facts(abi: int, doc: dict[str, Any] | None = None, errors: tuple[str, ...] = ()) -> Facts:
    config = load_config_text(tomli_w.dumps(doc), base_dir=Path("/tmp")) if doc else None
    return Facts(Path("/x/zeroclaw.toml"), config, errors, abi, Path("/tmp"))


def statuses(f: Facts) -> dict[str, tuple[str, str]]:
    return {r.name: (r.status, r.message) for r in run_checks(f)}


def with_sandbox(mode: str) -> dict[str, Any]:
    doc = copy.deepcopy(VALID_DOC)
    doc["risk_profiles"]["sup"]["sandbox"] = mode
    return doc


def test_everything_ok_with_landlock_7() -> None:
    got = statuses(facts(7, VALID_DOC))
    assert {k: v[0] for k, v in got.items()} == {
        "config": "ok",
        "landlock": "ok",
        "landlock_abstract_unix_scope": "ok",
        "agent alpha: sandbox": "ok",
        "agent beta: sandbox": "ok",
    }


def test_old_abi_warns_about_the_abstract_socket_scope() -> None:
    got = statuses(facts(5, VALID_DOC))
    assert got["landlock_abstract_unix_scope"][0] == "warn"
    assert got["agent alpha: sandbox"][0] == "ok"


@pytest.mark.parametrize(("abi", "mode"), [(7, "none"), (0, "auto")])
def test_unconfined_agents_are_warned(abi: int, mode: str) -> None:
    got = statuses(facts(abi, with_sandbox(mode)))
    status, message = got["agent alpha: sandbox"]
    assert status == "warn" and UNCONFINED in message
    assert UNCONFINED == (
        "commands are only parsed, not confined; the control socket is protected by the "
        "daemon's peer check only"
    )


def test_required_landlock_missing_fails() -> None:
    got = statuses(facts(0, with_sandbox("landlock")))
    assert got["agent alpha: sandbox"][0] == "fail"
    assert got["landlock"][0] == "warn"


def test_invalid_config_fails_and_skips_agent_checks() -> None:
    got = statuses(facts(7, None, ("x.toml: broken",)))
    assert got["config"] == ("fail", "x.toml: broken")
    assert not any(name.startswith("agent") for name in got)


def test_cli_json_has_schema_version_and_exit_codes(tmp_path: Path) -> None:
    good = tmp_path / "zeroclaw.toml"
    good.write_text(tomli_w.dumps(with_sandbox("none")))
    result = run_cli("--config", good, "doctor", "--json")
    assert result.returncode == 0, result.stderr  # warnings do not fail
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1 and data["ok"] is True
    by_name = {c["name"]: c for c in data["checks"]}
    assert by_name["agent alpha: sandbox"]["status"] == "warn"
    assert by_name["agent alpha: sandbox"]["fix"]
    if abi_version() >= 1:
        assert by_name["landlock"]["message"] == f"Landlock ABI {abi_version()}"

    missing = run_cli("--config", tmp_path / "nope.toml", "doctor")
    assert missing.returncode == 1
    assert missing.stdout.startswith("FAIL  config:") and "fix:" in missing.stdout
