"""bench/results.json, the figures of record: each suite's latest run, kept per suite.

A run of some suites (`python -m bench cli`) replaces those suites' figures and keeps the
others', so the file always holds one run of every suite, each with when and under what
load it was measured. `make reference` renders it as docs/reference/figures.md, where the
README and the guide point for every figure (they write none by hand).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from ._harness import Result

SCHEMA_VERSION = 1


def _load_average() -> float:
    return round(os.getloadavg()[0], 2)


class SuiteRun:
    """When a suite ran, on what, under what load (1-minute load average before and after)."""

    def __init__(self) -> None:
        self.started = time.time()
        self.load_before = _load_average()

    def record(self, results: list[Result]) -> dict[str, Any]:
        return {
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "load_before": self.load_before,
            "load_after": _load_average(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "machine": platform.machine(),
            "results": [r.as_json() for r in results],
        }


def read(path: Path) -> dict[str, Any]:
    """The record at `path`, or an empty one (none yet, or the list the bench wrote before
    the record kept suites apart)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        document = None
    if not isinstance(document, dict) or document.get("schema_version") != SCHEMA_VERSION:
        return {"schema_version": SCHEMA_VERSION, "suites": {}}
    return document


def write(path: Path, runs: dict[str, dict[str, Any]], order: list[str]) -> None:
    """Replace the suites in `runs`, keep the others; suites in `order` (the bench's)."""
    document = read(path)
    suites = {**document["suites"], **runs}
    ordered = {name: suites[name] for name in order if name in suites}
    document["suites"] = ordered
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
