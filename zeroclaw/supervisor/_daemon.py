"""`zeroclaw daemon`: a foreground trio process that supervises every agent.

`run_daemon` starts the zygote first, before anything else is loaded: a fresh interpreter
that imports the agents' code while this process loads its own, then reads and checks the
config (two cores at once; ADR 0067). The composition root (`_compose`, ADR 0050) does the
rest: it acquires the process's resources, each onto one exit stack, and builds every
service the config uses with what it uses.

Order matters: the zygote is started before trio.run, while the process has one thread.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .._prctl import set_not_dumpable
from .._trio_import import import_trio
from ._environment import zygote_environment
from ._zygote import DEFAULT_ENTRYPOINT, ENTRYPOINT_ENV, start_zygote


class DaemonError(Exception):
    """The daemon cannot start; the message says why and what to do."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class DescriptorLimit:
    """The soft RLIMIT_NOFILE before and after `raise_descriptor_limit`, and the hard one;
    `error` when it could not be raised (logged once logging is set up)."""

    soft: int
    target: int
    hard: int
    error: str | None = None


def raise_descriptor_limit() -> DescriptorLimit:
    """The soft RLIMIT_NOFILE up to the hard one (systemd's soft default of 1024 is for
    select()-era programs; we poll). Called before the zygote starts: agents inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as exc:
            return DescriptorLimit(soft, soft, hard, f"to {target}: {exc}")
    return DescriptorLimit(soft, target, hard)


def run_daemon(
    config_path: Path, env: Mapping[str, str] | None = None, *, log_level: str | None = None
) -> int:
    """`log_level` (from `zeroclaw --log-level`) replaces `[daemon] log_level` for the
    daemon and every agent it starts, across reloads; None keeps the config's."""
    env = dict(os.environ if env is None else env)
    # Nothing of our uid may ptrace us or read our environment (provider keys) through /proc.
    set_not_dumpable()
    limit = raise_descriptor_limit()
    # First of all: the zygote needs nothing of the config (its environment is the
    # allowlist), and what the configured providers need follows once the config is read.
    zygote = start_zygote(env.get(ENTRYPOINT_ENV, DEFAULT_ENTRYPOINT), zygote_environment(env))
    try:
        import_trio()  # before the composition root imports it: without a subprocess
        from ._compose import run_composed  # loaded while the zygote loads the agents' code

        return run_composed(zygote, config_path, env, log_level=log_level, limit=limit)
    finally:
        zygote.drop()  # only if the start failed before the composition root held it
