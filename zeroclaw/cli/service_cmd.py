"""`zeroclaw service install|uninstall|status [--user]`: the systemd unit, written for real.

The unit comes from the shipped template (`systemd/zeroclaw.service`, packaged as
`zeroclaw/ops/zeroclaw.service`), rendered by `zeroclaw.ops` with the path of this zeroclaw
and the config in use. Everything is planned first (pure), then printed (`--dry-run`) or done.
The hidden `--root DIR` (or `$ZEROCLAW_SERVICE_ROOT`) installs beneath DIR instead of `/`:
tests install for real into a temp dir; nothing is then run against this machine's manager.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

import click
import msgspec

from .._atomic import atomic_write
from ..ops import (
    InstallPlan,
    Scope,
    UnitFileState,
    UnitSpec,
    configured_command,
    install_plan,
    judge_unit_file,
    owned_paths,
    parse_show,
    render_unit,
    service_config_path,
    systemctl,
    under_root,
    uninstall_plan,
    unit_path,
    user_exists,
    written_by_us,
    zeroclaw_command,
)
from ._app import cli
from ._common import EXIT_FAILED, CliError, emit_json, json_option, state, wants_json

ROOT_ENV = "ZEROCLAW_SERVICE_ROOT"
SHOW_PROPERTIES = "LoadState,ActiveState,SubState,UnitFileState,MainPID,ExecMainStatus,Result"


class ServiceUser(msgspec.Struct, frozen=True):
    name: str
    exists: bool


class ServiceStatus(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """`service status --json`: the unit file, what it runs, the service user (system
    scope only) and the manager's properties (None: no manager to ask)."""

    scope: Scope
    unit_file: str
    state: UnitFileState
    exec_start: str | None
    would_run: str | None
    service_user: ServiceUser | None = None
    systemd: dict[str, str] | None


@cli.group("service")
def service_group() -> None:
    """Install, remove and inspect the systemd unit (system-wide, or --user)."""


def user_option(f: Any) -> Any:
    return click.option(
        "--user", "user", is_flag=True, help="The user manager's unit (~/.config/systemd/user)."
    )(f)


def root_option(f: Any) -> Any:
    return click.option(
        "--root",
        "root_opt",
        metavar="DIR",
        hidden=True,
        help=f"Install beneath DIR instead of / (tests; also ${ROOT_ENV}).",
    )(f)


def dry_run_option(f: Any) -> Any:
    return click.option(
        "--dry-run", is_flag=True, help="Print every file and command, change nothing."
    )(f)


# --------------------------------------------------------------------------- facts (I/O)


def _root(root_opt: str | None) -> Path:
    chosen = root_opt or os.environ.get(ROOT_ENV) or "/"
    return Path(os.path.abspath(chosen))


def _scope(user: bool) -> Scope:
    return "user" if user else "system"


def _template() -> str:
    return resources.files("zeroclaw.ops").joinpath("zeroclaw.service").read_text("utf-8")


def _running_script() -> str | None:
    """The `zeroclaw` script of this installation: the one running, else the one beside
    this interpreter (`python -m zeroclaw` in a venv). None: run with `python -m`."""
    argv0 = sys.argv[0]
    beside = os.path.join(os.path.dirname(sys.executable), "zeroclaw")
    for candidate in (argv0, beside):
        if (
            os.path.basename(candidate) == "zeroclaw"
            and os.path.isfile(candidate)
            and os.access(candidate, os.X_OK)
        ):
            return os.path.realpath(candidate)
    return None


def _documentation() -> tuple[str, ...]:
    """The README of this copy of zeroclaw, when it has one (a source or editable install);
    a wheel carries none, and there is no published manual page or site to point at."""
    import zeroclaw

    readme = Path(zeroclaw.__file__).resolve().parent.parent / "README.md"
    return (readme.as_uri(),) if readme.is_file() else ()


def _executables(command: Sequence[str]) -> list[str]:
    """The files the unit ends up executing: the script and the interpreter of its #! line
    (a venv's python is often a link into someone's home), or the interpreter itself."""
    found = [os.path.realpath(command[0])]
    if len(command) == 1:
        try:
            with open(command[0], "rb") as fh:
                first = fh.readline(4096)
        except OSError:
            return found
        if first.startswith(b"#!"):
            interpreter = first[2:].split()
            if interpreter:
                found.append(os.path.realpath(os.fsdecode(interpreter[0])))
    return found


def _manager_running(scope: Scope, env: Mapping[str, str]) -> bool:
    """Can systemctl talk to a running manager of this scope? (sd_booted, and the user
    manager's private socket.)"""
    if shutil.which("systemctl") is None:
        return False
    if scope == "system":
        return os.path.isdir("/run/systemd/system")
    runtime = env.get("XDG_RUNTIME_DIR")
    return bool(runtime) and os.path.exists(os.path.join(runtime or "", "systemd", "private"))


def _spec(scope: Scope) -> UnitSpec:
    config = service_config_path(scope, state().config_path, os.environ)
    command = zeroclaw_command(_running_script(), sys.executable)
    return UnitSpec(scope, command, config, _documentation())


def _read(path: Path) -> str | None:
    try:
        return path.read_text("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}", EXIT_FAILED) from None


def _need_root(scope: Scope, action: str) -> None:
    if scope == "system" and os.geteuid() != 0:
        raise CliError(
            f"'zeroclaw service {action}' writes to /etc and runs systemctl: run it as root "
            f"(sudo zeroclaw service {action}), or pass --user for your own user manager; "
            "--dry-run shows what it would do. Nothing was changed",
            EXIT_FAILED,
        )


def _run(command: Sequence[str]) -> None:
    click.echo(f"running: {' '.join(command)}")
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, check=False)
    except OSError as exc:
        raise CliError(f"cannot run {command[0]}: {exc.strerror}", EXIT_FAILED) from None
    for line in (done.stdout + done.stderr).splitlines():
        click.echo(f"  {line}")
    if done.returncode != 0:
        raise CliError(f"'{' '.join(command)}' failed (exit {done.returncode})", EXIT_FAILED)


# --------------------------------------------------------------------------- install


@service_group.command("install")
@user_option
@dry_run_option
@click.option("--force", is_flag=True, help="Replace a unit file zeroclaw did not write.")
@root_option
def install_cmd(user: bool, dry_run: bool, force: bool, root_opt: str | None) -> None:
    """Write the unit (and the zeroclaw system user), then daemon-reload.

    The unit runs this zeroclaw with the config given by --config (default: the system
    config, or your user config with --user)."""
    scope, root = _scope(user), _root(root_opt)
    if not dry_run:
        _need_root(scope, "install")
    spec = _spec(scope)
    plan = install_plan(
        _template(),
        spec,
        root,
        os.environ,
        manager_running=_manager_running(scope, os.environ),
        have_sysusers=shutil.which("systemd-sysusers") is not None,
        config_exists=spec.config_path.is_file(),  # a path on this machine, not under --root
        executables=_executables(spec.command),
    )
    for warning in plan.warnings:
        click.echo(f"zeroclaw: warning: {warning}", err=True)
    if dry_run:
        _print_plan(plan)
        return
    for write in plan.files:
        existing = _read(write.path)
        if existing is not None and not written_by_us(existing) and not force:
            raise CliError(
                f"{write.path} exists and was not written by 'zeroclaw service install'; "
                "move it away, or pass --force to replace it. Nothing was changed",
                EXIT_FAILED,
            )
    for write in plan.files:
        try:
            write.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(write.path, write.content.encode(), mode=write.mode)
        except OSError as exc:
            raise CliError(f"cannot write {write.path}: {exc.strerror}", EXIT_FAILED) from None
        click.echo(f"wrote {write.path}")
    for command in plan.commands:
        _run(command)
    _print_after(plan)


def _print_plan(plan: InstallPlan) -> None:
    for write in plan.files:
        click.echo(f"would write {write.path} (mode {write.mode:04o}):")
        for line in write.content.splitlines():
            click.echo(f"    {line}")
    for command in plan.commands:
        click.echo(f"would run: {' '.join(command)}")
    for command in plan.skipped:
        click.echo(f"would ask you to run (systemd is not running here): {' '.join(command)}")
    click.echo("then:")
    for step in plan.next_steps:
        click.echo(f"  {step}")


def _print_after(plan: InstallPlan) -> None:
    if plan.skipped:
        click.echo("systemd is not running here (or this is not the live root); run by hand:")
        for command in plan.skipped:
            click.echo(f"  {' '.join(command)}")
    click.echo("next:")
    for step in plan.next_steps:
        click.echo(f"  {step}")


# --------------------------------------------------------------------------- uninstall


@service_group.command("uninstall")
@user_option
@dry_run_option
@root_option
def uninstall_cmd(user: bool, dry_run: bool, root_opt: str | None) -> None:
    """Stop and disable the unit, and remove the files install wrote (only those)."""
    scope, root = _scope(user), _root(root_opt)
    if not dry_run:
        _need_root(scope, "uninstall")
    contents = {path: _read(path) for path in owned_paths(scope, root, os.environ)}
    plan = uninstall_plan(
        scope, root, os.environ, contents, manager_running=_manager_running(scope, os.environ)
    )
    if plan.refused:
        raise CliError("; ".join(plan.refused) + ". Nothing was removed", EXIT_FAILED)
    if not plan.remove:
        unit = under_root(root, unit_path(scope, os.environ))
        click.echo(f"nothing to remove: {unit} is not installed")
        return
    if dry_run:
        for command in plan.before:
            click.echo(f"would run: {' '.join(command)}")
        for path in plan.remove:
            click.echo(f"would remove {path}")
        for command in plan.after:
            click.echo(f"would run: {' '.join(command)}")
        return
    for command in plan.before:
        _run(command)
    for path in plan.remove:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise CliError(f"cannot remove {path}: {exc.strerror}", EXIT_FAILED) from None
        click.echo(f"removed {path}")
    for command in plan.after:
        _run(command)
    if scope == "system":
        click.echo(
            "the zeroclaw user and /var/lib/zeroclaw are kept (memory, sessions, workspaces); "
            "remove them with 'userdel zeroclaw' and 'rm -r /var/lib/zeroclaw' if you mean to"
        )


# --------------------------------------------------------------------------- status


@service_group.command("status")
@user_option
@json_option
@root_option
def status_cmd(user: bool, as_json: bool, root_opt: str | None) -> None:
    """Is the unit installed, is it what install would write now, and its systemd state."""
    scope, root = _scope(user), _root(root_opt)
    env = os.environ
    path = under_root(root, unit_path(scope, env))
    installed = _read(path)
    spec = _spec(scope)
    unit_file = judge_unit_file(installed, render_unit(_template(), spec))
    service_user = None
    if scope == "system":
        passwd = _read(under_root(root, PurePosixPath("/etc/passwd"))) or ""
        service_user = ServiceUser("zeroclaw", user_exists(passwd))
    live = root == Path("/") and _manager_running(scope, env)
    report = ServiceStatus(
        scope=scope,
        unit_file=str(path),
        state=unit_file,
        exec_start=configured_command(installed) if installed else None,
        would_run=configured_command(render_unit(_template(), spec)),
        service_user=service_user,
        systemd=_show(scope) if live else None,
    )
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(report))
        return
    words = {
        "absent": "not installed (zeroclaw service install" + (" --user" if user else "") + ")",
        "current": "installed, and what 'zeroclaw service install' would write now",
        "stale": "installed, but stale: 'zeroclaw service install' would write something else "
        "now (run it again to update the unit)",
        "foreign": "present, but not written by 'zeroclaw service install'",
    }
    click.echo(f"unit file   {path}: {words[unit_file]}")
    if report.exec_start:
        click.echo(f"runs        {report.exec_start}")
    if unit_file == "stale":
        click.echo(f"would run   {report.would_run}")
    if report.service_user is not None:
        exists = report.service_user.exists
        click.echo(
            "user        zeroclaw "
            + ("exists" if exists else "does not exist (install creates it with systemd-sysusers)")
        )
    props = report.systemd
    if props is None:
        click.echo("systemd     not running here (no manager to ask for the unit's state)")
    elif "error" in props:
        click.echo(f"systemd     could not ask the manager: {props['error']}")
    else:
        click.echo(
            f"systemd     {props.get('LoadState', '?')}, {props.get('ActiveState', '?')} "
            f"({props.get('SubState', '?')}), {props.get('UnitFileState') or 'not enabled'}"
            + (f", main pid {props['MainPID']}" if props.get("MainPID", "0") != "0" else "")
        )


def _show(scope: Scope) -> dict[str, str]:
    command = systemctl(scope, "show", "zeroclaw.service", f"--property={SHOW_PROPERTIES}")
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": str(exc)}
    if done.returncode != 0:
        return {"error": done.stderr.strip()}
    return parse_show(done.stdout)
