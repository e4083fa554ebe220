"""Every performance figure comes from bench/results.json (issue 31 #6): the README and the
guide state none by hand, the figures page is rendered from the record, and a run of one
suite keeps the others' figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench import _record
from bench._harness import result
from zeroclaw import _reference

REPO = Path(__file__).resolve().parent.parent.parent
# A measured quantity: a number with a unit of time, size or rate.
FIGURE = re.compile(r"\b\d[\d.,]*\s?(?:ms|µs|us|MB|KB|msg/s|turns/s|req/s)\b")


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, line) outside fenced blocks: commands may carry numbers."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def test_the_readme_and_the_guide_state_no_figure_by_hand() -> None:
    """A target may be named ("the target is 150 ms"); a measured figure lives in the record."""
    pages = [REPO / "README.md", *sorted((REPO / "docs" / "guide").glob("*.md"))]
    found = [
        f"{page.relative_to(REPO)}:{number}: {line.strip()}"
        for page in pages
        for number, line in prose_lines(page)
        if FIGURE.search(line) and "target" not in line
    ]
    assert not found, (
        "state figures in bench/results.json (make bench), not by hand:\n" + "\n".join(found)
    )


def test_the_readme_points_to_the_figures() -> None:
    assert "(docs/reference/figures.md)" in (REPO / "README.md").read_text(encoding="utf-8")


def test_a_run_of_one_suite_keeps_the_others_figures(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    order = ["config", "cli", "router"]
    cli, router = _record.SuiteRun(), _record.SuiteRun()
    _record.write(
        out, {"cli": cli.record([result("cli: status p50", 0.2, "s", "pass", 0.05)])}, order
    )
    _record.write(
        out, {"router": router.record([result("rtt p50", 0.6, "ms", "relay", 0.3)])}, order
    )
    again = _record.SuiteRun()
    _record.write(
        out, {"cli": again.record([result("cli: status p50", 0.1, "s", "pass", 0.05)])}, order
    )
    suites = json.loads(out.read_text())["suites"]
    assert list(suites) == ["cli", "router"]  # the bench's order, not the runs'
    assert (
        suites["cli"]["results"][0]["value"] == 0.1
        and suites["router"]["results"][0]["value"] == 0.6
    )
    page = _reference.figures_reference(out)
    assert (
        "## cli" in page
        and "## router" in page
        and "| rtt p50 | 0.6 ms | 0.3 ms: relay | 2 |" in page
    )


def test_a_record_of_the_old_shape_is_started_over(tmp_path: Path) -> None:
    """The bench wrote a bare list before the record kept suites apart."""
    out = tmp_path / "results.json"
    out.write_text(json.dumps([{"name": "x"}]))
    assert _record.read(out) == {"schema_version": _record.SCHEMA_VERSION, "suites": {}}
    assert "No run is recorded yet" in _reference.figures_reference(tmp_path / "absent.json")
