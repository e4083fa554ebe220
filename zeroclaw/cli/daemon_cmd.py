"""`zeroclaw daemon`, `status`, `agents ...`, `reload`, `stop`."""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime
from typing import Any, TypeVar

import click
import msgspec

from .._terminal import terminal_safe
from ..control import (
    AgentRestart,
    AgentsList,
    AgentStart,
    AgentStatus,
    AgentStop,
    BudgetStatus,
    ControlClient,
    ControlErrorCode,
    DaemonUnreachable,
    Reload,
    Reply,
    Request,
    Shutdown,
    Status,
    UntrustedDaemon,
    control_address,
    is_listening,
)
from ._app import cli
from ._common import (
    EXIT_FAILED,
    EXIT_NO_DAEMON,
    EXIT_USAGE,
    CliError,
    emit_json,
    json_option,
    plural,
    state,
    wants_json,
)


@cli.command("daemon")
@click.option(
    "--config", "config_opt", metavar="PATH", help="Config file (same as the global --config)."
)
@click.option(
    "--log-level",
    "log_level_opt",
    type=click.Choice(["debug", "info", "warning", "error"]),
    help="Log level of the daemon and its agents, instead of [daemon] log_level "
    "(the global --log-level before 'daemon' does the same).",
)
def daemon_cmd(config_opt: str | None, log_level_opt: str | None) -> None:
    """Run the supervisor in the foreground (systemd Type=notify)."""
    from ..supervisor import DaemonError, run_daemon

    st = state()
    if config_opt:
        st.config_path = config_opt
    try:
        code = run_daemon(st.locate(), log_level=log_level_opt or _given_log_level())
    except DaemonError as exc:
        raise CliError(str(exc), exc.exit_code) from None
    sys.exit(code)


def _given_log_level() -> str | None:
    """The root --log-level, only if the operator gave it: its default is the CLI's own
    level, and the daemon's default is its config's."""
    root = click.get_current_context().find_root()
    source = root.get_parameter_source("log_level")
    if source in (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT):
        value = root.params.get("log_level")
        return value if isinstance(value, str) else None
    return None


# The daemon would not serve this connection at all: as good as no daemon for this command.
REFUSALS: frozenset[ControlErrorCode] = frozenset({"busy", "forbidden"})


def control_client(timeout: float = 60.0) -> ControlClient:
    """A client of the daemon of the config in use. Its runtime dir comes from the light read
    of the file (no pydantic: ADR 0035), else from the full load, which also finds it in a
    file that does not validate and says what is wrong with one that cannot be read."""
    st = state()
    if st.light is not None:
        return ControlClient(st.light.runtime_dir, timeout=timeout)
    from ..config import runtime_dir_hint

    return ControlClient(runtime_dir_hint(st.locate(), os.environ), timeout=timeout)


class DaemonRefused(CliError):
    """Something answers on the control socket but will not serve us: exit 3 like no
    daemon, but no command may fall back to working without one (the daemon may be up)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_NO_DAEMON, code="daemon_refused")


def refusal_error(reply: Reply[Any]) -> DaemonRefused:
    what = "is busy" if reply.error == "busy" else "refused this connection"
    return DaemonRefused(f"the daemon {what} ({reply.error}): {reply.message}")


R = TypeVar("R")


def no_daemon(name: str, exc: Exception) -> CliError:
    """Nobody answers on the control socket: exit 3, and how to start the daemon."""
    return CliError(
        f"no zeroclaw daemon is answering on {name} ({exc}); start it with "
        "'zeroclaw daemon' (or 'systemctl start zeroclaw')",
        EXIT_NO_DAEMON,
    )


def call(request: Request[R], timeout: float = 60.0) -> Reply[R]:
    """One request, one final reply, its data decoded as the request's reply type. Every
    way of not being served is a CliError with exit 3 and a sentence, never a traceback, a
    KeyError on a missing field or a SIGPIPE."""
    client = control_client(timeout)
    try:
        reply = client.call(request)
    except UntrustedDaemon as exc:
        raise DaemonRefused(str(exc)) from None
    except DaemonUnreachable as exc:
        raise no_daemon(client.name, exc) from None
    except TimeoutError:
        raise CliError(
            f"the daemon did not answer within {timeout:g}s", EXIT_FAILED, code="daemon_timeout"
        ) from None
    except OSError as exc:
        raise CliError(f"lost the daemon on {client.name}: {exc}", EXIT_NO_DAEMON) from None
    if not reply.ok and reply.error in REFUSALS:
        raise refusal_error(reply)
    return reply


def _since(ts: float | None, now: float | None = None) -> str:
    """When an agent last changed state, on the wall clock: `14:02:07 (3m ago)`, the date
    too when it was not today; "never started" for an agent that has not run yet."""
    if ts is None:
        return "never started"
    now = time.time() if now is None else now
    when = datetime.fromtimestamp(ts)
    shown = when.strftime("%H:%M:%S")
    if when.date() != datetime.fromtimestamp(now).date():
        shown = when.strftime("%Y-%m-%d %H:%M")
    return f"{shown} ({_duration(max(0.0, now - ts))} ago)"


def _duration(secs: float) -> str:
    if secs < 120:
        return f"{secs:.0f}s"
    if secs < 7200:
        return f"{secs / 60:.0f}m"
    if secs < 2 * 86400:
        return f"{secs / 3600:.1f}h"
    return f"{secs / 86400:.1f}d"


def _in_force(value: bool | None) -> str:
    """The running agent's own report of its sandbox: yes, no, or - when not running."""
    return "-" if value is None else ("yes" if value else "no")


def _agents_table(agents: list[AgentStatus]) -> str:
    rows = [
        (
            "AGENT",
            "STATE",
            "PID",
            "RESTARTS",
            "SINCE",
            "LAST EXIT",
            "ACTIVATION",
            "SANDBOX",
            "IN FORCE",
        )
    ]
    for a in agents:
        rows.append(
            (
                a.alias,
                a.state,
                str(a.pid or "-"),
                str(a.restarts),
                _since(a.since),
                a.last_exit or "-",
                a.activation,
                a.sandbox,
                _in_force(a.sandbox_in_force),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )
    errors = [f"  {a.alias}: {a.last_error}" for a in agents if a.last_error]
    return table + ("\nlast errors:\n" + "\n".join(errors) if errors else "")


@cli.command("status")
@json_option
def status_cmd(as_json: bool) -> None:
    """Daemon pid, uptime, config, reload state, and every agent's state."""
    reply = call(Status())
    data = reply.data
    if not reply.ok or data is None:
        raise CliError(f"status failed ({reply.error}): {reply.message}", code=reply.error)
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(data))
        return
    d = data.daemon
    started = datetime.fromtimestamp(d.started_at).isoformat(timespec="seconds")
    uptime = f"up {d.uptime_secs:.0f}s (since {started})"
    click.echo(f"daemon    pid {d.pid}, {uptime}, version {d.version}")
    click.echo(f"config    {d.config}")
    reload = d.reload
    click.echo(
        f"reload    {reload.state}"
        + (
            f" at {datetime.fromtimestamp(reload.at).isoformat(timespec='seconds')}"
            if reload.at
            else ""
        )
    )
    for err in reload.errors:
        click.echo(f"          {err}")
    outcomes = data.router.outcomes
    refused = ", ".join(f"{k} {v}" for k, v in outcomes.items() if k != "delivered" and v)
    rogue = data.router.refused_connections
    click.echo(
        f"router    {outcomes.get('delivered', 0)} delivered; refused: {refused or 'none'}; "
        f"rejected connections: {rogue.zap_denied + rogue.handshake_failed}"
    )
    control = data.control
    if control:
        click.echo(
            f"control   {plural(control.connections, 'connection')}; refused: "
            f"{control.refused_peers} peers, {control.refused_busy} busy; "
            f"{control.reaped_idle} idle reaped"
        )
    for channel in data.channels:
        keys = ", ".join(channel.keys)
        detail = f" ({channel.last_error})" if channel.state == "failed" else ""
        retry = ""
        if channel.retry_at is not None:
            retry = f"; next start in {max(0.0, channel.retry_at - time.time()):.0f}s"
        refused = ", ".join(f"{rule} {n}" for rule, n in sorted(channel.refused.items()))
        counts = f"; {channel.delivered} delivered, refused: {refused or 'none'}"
        click.echo(f"channel   {keys}: {channel.state}{detail}{retry}{counts}")
    found = data.discovery
    if found is not None:
        if found.scanned_at is None:
            click.echo("discovery no scan yet")
        else:
            when = datetime.fromtimestamp(found.scanned_at).isoformat(timespec="seconds")
            adapters = plural(found.registered_adapters, "adapter")
            click.echo(f"discovery scanned {when}; {adapters} registered")
        if found.degraded:
            click.echo(f"degraded  required but not registered: {', '.join(found.degraded)}")
    if data.mcp is not None:
        pins = data.mcp
        text = f"mcp       {plural(pins.servers, 'server')}; {plural(pins.pinned, 'tool')} pinned"
        if pins.withheld:
            text += f", {pins.withheld} withheld (changed schema): zeroclaw mcp tools"
        click.echo(text)
        if pins.store_problem:
            click.echo(f"degraded  {terminal_safe(pins.store_problem, one_line=True)}")
    for due in data.schedules:
        when = datetime.fromtimestamp(due.at).isoformat(timespec="seconds")
        click.echo(f"schedule  {due.agent}.{due.schedule} next at {when}; zeroclaw schedules list")
    for p in data.providers:
        text = f"provider  {p.agent} {p.provider}: {p.state}"
        if p.failures:
            text += f" after {plural(p.failures, 'failure')}"
        if p.state == "open":
            text += f", skipped for {p.retry_in_secs:.0f}s more"
        if p.last_error and p.state != "closed":
            text += f" ({terminal_safe(p.last_error, one_line=True)})"
        click.echo(text)
    for b in data.budgets:
        click.echo(f"budget    {b.agent} {b.scope}: {_budget_text(b)}")
    for a in data.approvals:
        who = terminal_safe(f"{a.channel}:{a.sender}", one_line=True)
        what = terminal_safe(a.what, one_line=True)
        click.echo(
            f"approval  {a.id} {a.agent} for {who} waits ({a.expires_in_secs:.0f}s left): "
            f"{what}; zeroclaw approvals approve|deny"
        )
    click.echo("")
    click.echo(_agents_table(data.agents))
    if data.runtimes:
        click.echo("\nsub-agent runtimes (one per revision, started on demand):")
        click.echo(_agents_table(data.runtimes))


def _budget_text(budget: BudgetStatus) -> str:
    """`1200/50000 tokens, 0.012/2.000000 today; 3/60 turns this hour`."""
    parts = []
    if budget.tokens_per_day is not None:
        parts.append(f"{budget.tokens}/{budget.tokens_per_day} tokens today")
    if budget.cost_per_day is not None:
        parts.append(f"cost {budget.cost}/{budget.cost_per_day} today")
    if budget.turns_per_hour is not None:
        parts.append(f"{budget.turns_last_hour}/{budget.turns_per_hour} turns in the last hour")
    return "; ".join(parts)


@cli.group("agents")
def agents_group() -> None:
    """List, start, stop and restart agents."""


@agents_group.command("list")
@json_option
def agents_list(as_json: bool) -> None:
    """Every enabled agent and its state."""
    reply = call(AgentsList())
    if not reply.ok or reply.data is None:
        raise CliError(f"agents list failed ({reply.error}): {reply.message}", code=reply.error)
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(reply.data))
    else:
        click.echo(_agents_table(reply.data.agents))


def _agent_action(request: Request[AgentStatus], verb: str, as_json: bool) -> None:
    reply = call(request)
    agent = reply.data
    if wants_json(as_json):
        emit_json(
            {
                "ok": reply.ok,
                "agent": msgspec.to_builtins(agent),
                "error": reply.error,
                "message": reply.message,
            }
        )
    elif reply.ok and agent is not None:
        click.echo(f"{agent.alias}: {verb} ({agent.state}, pid {agent.pid or '-'})")
    if not reply.ok:
        if not wants_json(as_json):
            click.echo(f"zeroclaw: error: {reply.message}", err=True)
        sys.exit(EXIT_USAGE if reply.error == "unknown_agent" else EXIT_FAILED)


@agents_group.command("start")
@click.argument("alias")
@json_option
def agents_start(alias: str, as_json: bool) -> None:
    """Start an agent (also clears 'fatal'); waits until it is running."""
    _agent_action(AgentStart(alias), "started", as_json)


@agents_group.command("stop")
@click.argument("alias")
@json_option
def agents_stop(alias: str, as_json: bool) -> None:
    """Stop an agent: SIGTERM, then SIGKILL after the grace period."""
    _agent_action(AgentStop(alias), "stopped", as_json)


@agents_group.command("restart")
@click.argument("alias")
@json_option
def agents_restart(alias: str, as_json: bool) -> None:
    """Restart an agent (also clears 'fatal'); waits until it is running again."""
    _agent_action(AgentRestart(alias), "restarted", as_json)


@cli.command("reload")
@json_option
def reload_cmd(as_json: bool) -> None:
    """Validate the config file and apply what changed (like SIGHUP)."""
    reply = call(Reload())
    result = reply.data
    if wants_json(as_json):
        emit_json({"ok": reply.ok, **(msgspec.to_builtins(result) if result else {})})
    elif reply.ok and result is not None:
        changes = "; ".join(f"{k} {', '.join(v) or '-'}" for k, v in result.diff.items())
        click.echo(f"reloaded: {changes or 'nothing changed'}")
    elif result is not None and result.reload == "incomplete":
        click.echo(f"zeroclaw: reload applied, but not finished: {reply.message}", err=True)
        for line in result.errors:
            click.echo(f"  {line}", err=True)
    else:
        click.echo("zeroclaw: reload refused, the running config is unchanged:", err=True)
        for line in result.errors if result is not None else [reply.message or ""]:
            click.echo(f"  {line}", err=True)
    if not reply.ok:
        incomplete = result is not None and result.reload == "incomplete"
        sys.exit(EXIT_FAILED if incomplete else EXIT_USAGE)


@cli.command("stop")
@json_option
@click.option("--no-wait", is_flag=True, help="Return at once instead of waiting for the exit.")
def stop_cmd(as_json: bool, no_wait: bool) -> None:
    """Stop the daemon and every agent; waits until it has exited."""
    client = control_client()
    reply = call(Shutdown())
    pid = reply.data.pid if reply.data is not None else None
    gone = no_wait or _wait_gone(control_address(client.runtime_dir), timeout=120)
    if wants_json(as_json):
        emit_json({"ok": gone, "pid": pid, "stopped": gone})
    else:
        click.echo(f"daemon (pid {pid}) {'stopped' if gone else 'is still stopping'}")
    if not gone:
        sys.exit(EXIT_FAILED)


def _wait_gone(address: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_listening(address):
            return True
        time.sleep(0.05)
    return False
