"""`python -m bench [SUITE...]`: every benchmark (or the named suites) beside its baseline, a
table, and bench/results.json, the figures of record (`make reference` renders them as
docs/reference/figures.md)."""

from __future__ import annotations

import argparse
import platform
import sys
import traceback
from pathlib import Path
from typing import Any

from . import (
    _record,
    bench_agent,
    bench_channels,
    bench_cli,
    bench_config,
    bench_discovery,
    bench_gateway,
    bench_mcp,
    bench_memory,
    bench_router,
    bench_scale,
    bench_schedules,
    bench_subagents,
    bench_supervisor,
)
from ._harness import Result, table

SUITES = {
    "config": bench_config.run,
    "supervisor": bench_supervisor.run,
    "router": bench_router.run,
    "memory": bench_memory.run,
    "agent": bench_agent.run,
    "subagents": bench_subagents.run,
    "channels": bench_channels.run,
    "gateway": bench_gateway.run,
    "discovery": bench_discovery.run,
    "mcp": bench_mcp.run,
    "cli": bench_cli.run,
    "scale": bench_scale.run,
    "schedules": bench_schedules.run,
}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("only", nargs="*", help=f"suites to run (default all): {', '.join(SUITES)}")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results.json"))
    args = parser.parse_args()
    chosen = args.only or list(SUITES)
    unknown = [name for name in chosen if name not in SUITES]
    if unknown:
        parser.error(f"unknown suite {', '.join(unknown)}; suites: {', '.join(SUITES)}")
    results: list[Result] = []
    runs: dict[str, dict[str, Any]] = {}
    failed: list[str] = []
    for name in chosen:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        run = _record.SuiteRun()
        try:
            suite = SUITES[name]()
        except Exception:  # one broken suite must not lose the figures of the others
            traceback.print_exc()
            failed.append(name)
            continue
        print(table(suite), file=sys.stderr, flush=True)  # each suite's figures as they come
        results.extend(suite)
        runs[name] = run.record(suite)
    print(table(results))
    _record.write(Path(args.out), runs, list(SUITES))
    print(f"\nwrote {args.out} (python {platform.python_version()}, {platform.machine()})")
    if failed:
        print(f"failed suites: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
