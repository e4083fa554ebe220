"""`zeroclaw doctor [--json]`: what on this machine weakens or breaks zeroclaw, with the fix.

Each check is one function from a `Facts` snapshot (gathered once, the only I/O) to check
results; `CHECKS` lists them in the order they print. A new check is a new function added
to that list. Exit 0 unless a check fails (warnings do not fail), 1 if one does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import click

from ..config import Config, ConfigError, effective_risk_policy, load_config
from ..policy import abi_version
from ._app import cli
from ._common import EXIT_FAILED, emit_json, json_option, state, wants_json

Status = Literal["ok", "warn", "fail"]
ABSTRACT_UNIX_SCOPE_ABI = 6  # LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
UNCONFINED = (
    "commands are only parsed, not confined; the control socket is protected by the "
    "daemon's peer check only"
)


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    message: str
    fix: str = ""


@dataclass(frozen=True)
class Facts:
    """Everything the checks look at."""

    config_path: Path | None
    config: Config | None
    config_errors: tuple[str, ...]
    landlock_abi: int
    base_dir: Path | None = None


def check_config(facts: Facts) -> list[CheckResult]:
    if facts.config is not None:
        return [CheckResult("config", "ok", f"{facts.config_path} is valid")]
    return [
        CheckResult(
            "config",
            "fail",
            "; ".join(facts.config_errors) or "no valid config",
            "fix what the message names, or create a config with 'zeroclaw config init'",
        )
    ]


def check_landlock(facts: Facts) -> list[CheckResult]:
    abi = facts.landlock_abi
    if abi < 1:
        return [
            CheckResult(
                "landlock",
                "warn",
                "this kernel offers no Landlock: agents and their commands are not confined "
                "by the kernel",
                "run a kernel >= 5.13 with Landlock enabled (lsm=...,landlock) and allow the "
                "landlock_* syscalls in any seccomp filter",
            )
        ]
    results = [CheckResult("landlock", "ok", f"Landlock ABI {abi}")]
    if abi < ABSTRACT_UNIX_SCOPE_ABI:
        results.append(
            CheckResult(
                "landlock_abstract_unix_scope",
                "warn",
                f"Landlock ABI {abi} < {ABSTRACT_UNIX_SCOPE_ABI}: the kernel cannot keep agents "
                "from abstract unix sockets; the control socket relies on the daemon's peer "
                "check",
                "run Linux >= 6.12 for the abstract-unix-socket scope",
            )
        )
    else:
        results.append(
            CheckResult("landlock_abstract_unix_scope", "ok", "abstract unix sockets can be scoped")
        )
    return results


def check_agent_sandboxes(facts: Facts) -> list[CheckResult]:
    if facts.config is None:
        return []
    results = []
    for alias, agent in sorted(facts.config.agents.items()):
        if not agent.enabled or agent.risk_profile is None:
            continue
        mode = effective_risk_policy(facts.config, alias, os.environ, facts.base_dir).sandbox
        name = f"agent {alias}: sandbox"
        if mode == "landlock" and facts.landlock_abi < 1:
            results.append(
                CheckResult(
                    name,
                    "fail",
                    'sandbox = "landlock" but this kernel has no Landlock: the agent cannot start',
                    f'use a kernel with Landlock, or set sandbox = "auto" in risk profile '
                    f"{agent.risk_profile!r} (and accept unconfined commands)",
                )
            )
        elif mode == "none" or facts.landlock_abi < 1:
            why = 'sandbox = "none"' if mode == "none" else "no Landlock"
            results.append(
                CheckResult(
                    name,
                    "warn",
                    f"{why}: {UNCONFINED}",
                    f'set sandbox = "auto" in risk profile {agent.risk_profile!r} on a kernel '
                    "with Landlock",
                )
            )
        else:
            results.append(CheckResult(name, "ok", f"Landlock ABI {facts.landlock_abi} ({mode})"))
    return results


Check = Callable[[Facts], list[CheckResult]]
CHECKS: tuple[Check, ...] = (check_config, check_landlock, check_agent_sandboxes)


def run_checks(facts: Facts, checks: tuple[Check, ...] = CHECKS) -> list[CheckResult]:
    return [result for check in checks for result in check(facts)]


def gather_facts() -> Facts:
    path: Path | None = None
    try:
        path = state().locate()
        config: Config | None = load_config(path)
        errors: tuple[str, ...] = ()
    except ConfigError as exc:
        config, errors = None, tuple(exc.lines())
    base = path.parent if path is not None else None
    return Facts(path, config, errors, abi_version(), base)


@cli.command("doctor")
@json_option
def doctor_cmd(as_json: bool) -> None:
    """Check the config and the kernel's sandbox; say what is weak and how to fix it."""
    results = run_checks(gather_facts())
    failed = any(r.status == "fail" for r in results)
    if wants_json(as_json):
        emit_json({"ok": not failed, "checks": [asdict(r) for r in results]})
    else:
        for r in results:
            click.echo(f"{r.status.upper():4}  {r.name}: {r.message}")
            if r.fix and r.status != "ok":
                click.echo(f"      fix: {r.fix}")
    if failed:
        sys.exit(EXIT_FAILED)
