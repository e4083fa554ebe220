"""What every command shares: the global options' state, exit codes, output helpers."""

from __future__ import annotations

import functools
import json
import math
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import click

from .._terminal import terminal_safe
from ..config import ConfigError, locate_config

if TYPE_CHECKING:
    from ..config import Config, LightConfig

SCHEMA_VERSION = 1

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_DAEMON = 3

# The `error.code` of a failed command's `--json` output when the failure is the CLI's own
# (a code the daemon replied with, e.g. `unknown_agent`, is passed on as it is).
CliErrorCode = Literal[
    "usage",  # exit 2: bad options or arguments
    "config_not_found",  # exit 2: --config or $ZEROCLAW_CONFIG names no file
    "config_invalid",  # exit 2: the config file does not load
    "daemon_unreachable",  # exit 3: nobody answers on the control socket
    "daemon_refused",  # exit 3: something answers but will not serve this connection
    "daemon_timeout",  # exit 1: the daemon did not answer in time
    "provider_unavailable",  # exit 1: the agent's model provider cannot be built
    "sandbox_unavailable",  # exit 1: chat without a daemon, sandbox = "landlock", no Landlock
    "failed",  # exit 1: the operation failed (the message says how)
    "not_found",  # exit 1: `discover explain` of an id nothing discovered has
    "discovery_disabled",  # exit 1: `discover ...` with [discovery] enabled = false
    "cache_locked",  # exit 1: another `discover scan` writes the discovery cache
    "interrupted",  # exit 130: Ctrl-C
    "internal",  # exit 1: a bug; --debug shows the traceback
]
_CODE_BY_EXIT: dict[int, CliErrorCode] = {
    EXIT_USAGE: "usage",
    EXIT_NO_DAEMON: "daemon_unreachable",
    130: "interrupted",
}


def finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Click callback for float options: `nan` and `inf` are usage errors, not filters that
    silently match nothing (or everything)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value!r} is not a finite number")
    return value


def plural(n: int, word: str) -> str:
    """`1 agent`, `2 agents`: counts as a person would write them."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class CliError(Exception):
    """An operation failed in a way the operator can act on; printed without a traceback.
    `code` is its `--json` error code: a CliErrorCode, or a code the daemon replied with;
    by default the one its exit code implies."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED, code: str | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.code: str = code or _CODE_BY_EXIT.get(exit_code, "failed")


@dataclass
class CliState:
    """The global options (given before or after the subcommand), reachable from every
    command, and what the command has already said."""

    config_path: str | None
    agent: str | None
    json: bool
    debug: bool
    log_level: str
    emitted: bool = False  # a JSON document is on stdout: a failure adds no second one
    # Why this command works without the daemon (the store opened directly, the agent run
    # in-process): one line on stderr, and the `fallback` field of its JSON output.
    fallback: dict[str, str] | None = None

    def locate(self) -> Path:
        return locate_config(self.config_path, os.environ)

    @functools.cached_property
    def light(self) -> LightConfig | None:
        """The config file read lightly (ADR 0035), once per command: its daemon's paths and
        enabled agents; None when only the full load can say."""
        from ..config import read_light_config

        return read_light_config(self.locate(), os.environ)

    def load(self) -> tuple[Path, Config]:
        from ..config import load_config  # the pydantic models: only commands that need them

        path = self.locate()
        return path, load_config(path)


def state() -> CliState:
    obj = click.get_current_context().find_root().obj
    assert isinstance(obj, CliState)
    return obj


def current_state() -> CliState | None:
    """The state when a command line is being run (not during shell completion)."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    return obj if isinstance(obj, CliState) else None


def wants_json(local_flag: bool = False) -> bool:
    """`--json` may be given before or after the command (it is one flag: see _app)."""
    return local_flag or state().json


def safe_echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """`click.echo` of text that holds model or outside text: escaped for the terminal
    (`terminal_safe`), so a reply, a sender's message or a stored record cannot write the
    clipboard, move the cursor or hide what it says."""
    click.echo(terminal_safe(text), err=err, nl=nl)


def emit_json(payload: Mapping[str, object]) -> None:
    st = current_state()
    document: dict[str, object] = {"schema_version": SCHEMA_VERSION, **payload}
    if st is not None:
        st.emitted = True
        if st.fallback is not None and "fallback" not in document:
            document["fallback"] = st.fallback
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")


def error_json(code: str, message: str, **extra: object) -> dict[str, object]:
    """The one shape of a failed command's `--json` output (without schema_version)."""
    return {"ok": False, "error": {"code": code, "message": message, **extra}}


def fallback(mode: str, reason: str, message: str, **where: str) -> None:
    """Say once, on stderr, that this command works without the daemon, where and why; a
    JSON output carries it in its `fallback` field."""
    st = state()
    if st.fallback is None:
        safe_echo(f"zeroclaw: {message}", err=True)
    st.fallback = {"mode": mode, "reason": reason, **where, "message": message}


def with_config(text: str, config_path: str | None) -> str:
    """A hint names a command as the operator must run it: with the --config they passed
    (a plain `zeroclaw daemon` would look at another config, or none)."""
    if not config_path:
        return text
    return text.replace("'zeroclaw ", f"'zeroclaw --config {shlex.quote(config_path)} ")


def print_config_error(exc: ConfigError, config_path: str | None = None) -> None:
    for line in exc.lines():
        click.echo(with_config(line, config_path), err=True)


def _json_flag(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    # A command's own --json is the global flag too: the error boundary answers in JSON.
    st = current_state()
    if value and st is not None:
        st.json = True
    return value


json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    callback=_json_flag,
    help="Print machine-readable JSON (with schema_version).",
)


class CheckLike(Protocol):
    """One check of a doctor (`zeroclaw doctor`, `zeroclaw discover doctor`)."""

    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...  # ok | warn | fail
    @property
    def message(self) -> str: ...
    @property
    def fix(self) -> str: ...


def report_checks(checks: Sequence[CheckLike], as_json: bool) -> None:
    """Print a doctor's checks (a line each, the fix under each that is not ok, or `{ok,
    checks}` as JSON) and exit 1 when one failed (warnings do not fail)."""
    failed = any(c.status == "fail" for c in checks)
    if wants_json(as_json):
        emit_json(
            {
                "ok": not failed,
                "checks": [
                    {"name": c.name, "status": c.status, "message": c.message, "fix": c.fix}
                    for c in checks
                ],
            }
        )
    else:
        for c in checks:
            click.echo(f"{c.status.upper():4}  {c.name}: {c.message}")
            if c.fix and c.status != "ok":
                click.echo(f"      fix: {c.fix}")
    if failed:
        sys.exit(EXIT_FAILED)
