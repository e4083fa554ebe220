"""`python -m bench`: every benchmark beside its baseline, a table, and bench/results.json."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import traceback
from pathlib import Path

from . import (
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
    unknown = [name for name in args.only if name not in SUITES]
    if unknown:
        parser.error(f"no such suite: {', '.join(unknown)} (the suites: {', '.join(SUITES)})")
    chosen = args.only or list(SUITES)
    results: list[Result] = []
    rows: list[dict[str, object]] = []
    failed: list[str] = []
    for name in chosen:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            suite = SUITES[name]()
        except Exception:  # one broken suite must not lose the figures of the others
            traceback.print_exc()
            failed.append(name)
            continue
        print(table(suite), file=sys.stderr, flush=True)  # each suite's figures as they come
        results.extend(suite)
        rows += [{"suite": name, **r.as_json()} for r in suite]
    print(table(results))
    # Some suites run: the figures of the others, from an earlier run, stay in the file.
    rows = [r for r in _earlier(Path(args.out)) if r.get("suite") not in chosen] + rows
    Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
    print(f"\nwrote {args.out} (python {platform.python_version()}, {platform.machine()})")
    if failed:
        print(f"failed suites: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _earlier(path: Path) -> list[dict[str, object]]:
    """The rows an earlier run wrote (none when there is no file or it is not ours)."""
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


if __name__ == "__main__":
    raise SystemExit(main())
