"""Run the real `zeroclaw` CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def run_cli(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "zeroclaw", *map(str, args)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        input=input,
        check=False,
    )
