"""`zeroclaw memory ...` as an operator meets it: `--since 2h|yesterday|ISO`, `export --json`,
wording a person would write, and, with no daemon, one line naming the store opened and why."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import tomli_w

from tests.cli.helpers import run_cli
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.cli.memory_cmd import parse_when

UTC2 = timezone(timedelta(hours=2))
NOW = datetime(2026, 12, 1, 15, 30, 0, tzinfo=UTC2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", NOW - timedelta(minutes=30)),
        ("2h", NOW - timedelta(hours=2)),
        ("3d", NOW - timedelta(days=3)),
        ("1w", NOW - timedelta(weeks=1)),
        ("45s", NOW - timedelta(seconds=45)),
        ("1.5h", NOW - timedelta(minutes=90)),
        (" 2H ", NOW - timedelta(hours=2)),
        ("today", datetime(2026, 12, 1, tzinfo=UTC2)),
        ("yesterday", datetime(2026, 11, 30, tzinfo=UTC2)),
        ("2026-11-02", datetime(2026, 11, 2, tzinfo=UTC2)),  # local midnight
        ("2026-11-02T08:15", datetime(2026, 11, 2, 8, 15, tzinfo=UTC2)),  # local time
        ("2026-11-02T08:15:00+00:00", datetime(2026, 11, 2, 8, 15, tzinfo=UTC)),
        ("2026-11-02T08:15Z", datetime(2026, 11, 2, 8, 15, tzinfo=UTC)),
    ],
)
def test_when_forms_are_points_in_time(text: str, expected: datetime) -> None:
    assert parse_when(text, NOW) == pytest.approx(expected.timestamp())


def test_a_unix_time_is_still_a_unix_time() -> None:
    assert parse_when("1700000000.5", NOW) == 1700000000.5


@pytest.mark.parametrize("text", ["soon", "2 hours", "-2h", "2x", "", "nan", "inf", "2026-13-01"])
def test_anything_else_is_refused_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="30m, 2h, 3d"):
        parse_when(text, NOW)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(make_config(tmp_path, {"alpha": agent_entry()})))
    return path


def test_without_a_daemon_memory_says_which_store_and_why(config: Path, tmp_path: Path) -> None:
    store = tmp_path / "state" / "memory"
    stored = run_cli("--config", config, "memory", "store", "k1", "first", "-a", "alpha")
    assert stored.returncode == 0, stored.stderr
    line = f"no daemon answers on {tmp_path / 'run'}; opened the store at {store} directly"
    assert stored.stderr.count(line) == 1, stored.stderr
    # With --json: the same line on stderr, and in a field of the JSON, never loose on stdout.
    listed = run_cli("--config", config, "memory", "list", "-a", "alpha", "--json")
    assert line in listed.stderr
    data = json.loads(listed.stdout)
    assert [r["key"] for r in data["records"]] == ["k1"]
    assert data["fallback"]["mode"] == "store" and data["fallback"]["store"] == str(store)
    assert data["fallback"]["message"] == line


def test_list_since_export_json_and_counts_in_words(config: Path) -> None:
    for key in ("k1", "k2"):
        assert (
            run_cli("--config", config, "-a", "alpha", "memory", "store", key, "x").returncode == 0
        )
    recent = run_cli("--config", config, "-a", "alpha", "memory", "list", "--since", "2h", "--json")
    assert {r["key"] for r in json.loads(recent.stdout)["records"]} == {"k1", "k2"}
    later = (datetime.now().astimezone() + timedelta(days=1)).date().isoformat()
    future = run_cli("--config", config, "-a", "alpha", "memory", "list", "--since", later)
    assert future.returncode == 0 and future.stdout == ""
    yesterday = run_cli("--config", config, "-a", "alpha", "memory", "list", "--since", "yesterday")
    assert yesterday.stdout.count("[alpha]") == 2
    bad = run_cli("--config", config, "-a", "alpha", "memory", "list", "--since", "last week")
    assert bad.returncode == 2 and "'last week' is not a time; use 30m, 2h" in bad.stderr

    exported = run_cli("--config", config, "-a", "alpha", "memory", "export", "--json")
    document = json.loads(exported.stdout)
    assert document["schema_version"] == 1
    assert sorted(r["key"] for r in document["records"]) == ["k1", "k2"]
    lines = run_cli("--config", config, "-a", "alpha", "memory", "export").stdout.splitlines()
    assert sorted(json.loads(line)["key"] for line in lines) == ["k1", "k2"]  # JSON lines

    stats = run_cli("--config", config, "-a", "alpha", "memory", "stats")
    assert "alpha: 2 records, 0 session turns" in stats.stdout, stats.stdout
    purged = run_cli("--config", config, "-a", "alpha", "memory", "purge", "--yes")
    assert "purged 2 records" in purged.stdout
    run_cli("--config", config, "-a", "alpha", "memory", "store", "k3", "x")
    assert (
        "purged 1 record\n"
        in run_cli("--config", config, "-a", "alpha", "memory", "purge", "--yes").stdout
    )


def test_no_python_list_reprs_in_human_output(config: Path) -> None:
    validated = run_cli("--config", config, "config", "validate")
    assert "(1 agent, 1 enabled agent, 0 peer groups, 1 channel, 1 provider)" in validated.stdout
    for result in (validated, run_cli("--config", config, "-a", "alpha", "memory", "stats")):
        assert "['" not in result.stdout + result.stderr


def test_a_store_that_cannot_be_opened_is_an_error_not_a_crash(tmp_path: Path) -> None:
    doc = make_config(tmp_path, {"alpha": agent_entry()})
    doc["daemon"]["state_dir"] = "/dev/null/state"
    config = tmp_path / "zeroclaw.toml"
    config.write_text(tomli_w.dumps(doc))
    result = run_cli("--config", config, "-a", "alpha", "memory", "list", "--json")
    assert result.returncode == 1, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "failed", error
    assert "cannot use the memory store in /dev/null/state" in error["message"]
    assert "Not a directory" in error["message"] and "internal error" not in result.stderr
