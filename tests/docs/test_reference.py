"""The reference in docs/reference/ and the ADR index are what the code generates: a new
config key, CLI option, error code or ADR without `make reference` fails here."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from zeroclaw import _reference
from zeroclaw._error_codes import families

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.mark.parametrize("name", sorted(_reference.GENERATORS))
def test_the_committed_reference_is_what_the_code_generates(name: str) -> None:
    committed = (REPO / name).read_text(encoding="utf-8")
    assert committed == _reference.generated(REPO)[name], f"{name} is stale: run `make reference`"


def test_every_config_key_is_in_the_reference() -> None:
    from zeroclaw.config import Config

    text = (REPO / "docs/reference/config.md").read_text(encoding="utf-8")
    assert "`risk_profiles.<name>.approval_timeout_secs`" in text
    for name in Config.model_fields:
        assert f"[{name}" in text or f"`{name}`" in text, name


def test_every_command_and_option_is_in_the_reference() -> None:
    import click

    from zeroclaw.cli import cli

    text = (REPO / "docs/reference/cli.md").read_text(encoding="utf-8")
    for path, command in _reference._walk_commands(cli, ("zeroclaw",)):
        assert f"`{' '.join(path)}`" in text, path
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert f"`{param.opts[0]}`" in text, (path, param.opts)


def test_every_error_code_is_in_the_reference() -> None:
    text = (REPO / "docs/reference/error-codes.md").read_text(encoding="utf-8")
    for family in families().values():
        row = next(line for line in text.splitlines() if line.startswith(f"| {family.title} |"))
        assert all(f"`{code}`" in row for code in family.codes), family.title


def test_a_missing_adr_fails_the_index(tmp_path: Path) -> None:
    """An ADR file added without regenerating the index is found by the check."""
    adr = tmp_path / "docs" / "adr"
    shutil.copytree(REPO / "docs" / "adr", adr)
    (adr / "9999-a-new-decision.md").write_text("# 9999 A new decision\n\nStatus: proposed\n")
    index = _reference.adr_index(adr)
    assert "| [9999](9999-a-new-decision.md) | A new decision | proposed |" in index
    assert index != (REPO / "docs" / "adr" / "README.md").read_text(encoding="utf-8")


def test_the_adr_index_lists_every_adr_file() -> None:
    index = (REPO / "docs" / "adr" / "README.md").read_text(encoding="utf-8")
    numbers = re.findall(r"^\| \[(\d{4})\]\((\S+)\)", index, re.MULTILINE)
    files = sorted(p.name for p in (REPO / "docs" / "adr").glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert [name for _, name in numbers] == files
    assert all(name.startswith(number) for number, name in numbers)


def test_check_mode_reports_a_stale_file_and_the_rewrite_fixes_it(tmp_path: Path) -> None:
    shutil.copytree(REPO / "docs" / "adr", tmp_path / "docs" / "adr")
    assert _reference.main(["--check", str(tmp_path)]) == 1  # nothing generated there yet
    assert _reference.main([str(tmp_path)]) == 0
    assert _reference.main(["--check", str(tmp_path)]) == 0
    stale = tmp_path / "docs" / "reference" / "cli.md"
    stale.write_text(stale.read_text() + "\nhand edit\n")
    assert _reference.main(["--check", str(tmp_path)]) == 1
