"""The root `zeroclaw` command group: global options and the no-traceback error boundary.

Global options (`--config`, `--agent/-a`, `--json`, `--debug`, `--log-level`) may come before
or after any subcommand, nested ones included (ADR 0032): every command and group is built
from `GlobalCommand`/`GlobalGroup`, which add hidden copies of them whose callbacks write into
the root's `CliState` (the value given later, nearer the command, wins). A command that
defines an option with one of those names itself (`daemon --config`, `memory ... --agent`,
`invocations list --agent ID`) keeps its own; a command's own `--json` sets the global flag.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import click

from .._terminal import terminal_safe
from .._version import __version__
from ..config import ConfigError
from ._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    CliState,
    current_state,
    emit_json,
    error_json,
    print_config_error,
    with_config,
)

LOG_LEVELS = ("debug", "info", "warning", "error")
ARGV_KEY = "zeroclaw.argv"


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
        force=True,
    )


def _set_global(field: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    """The callback of a global option's copy on a subcommand: an explicit value overrides
    the one given before the subcommand."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        st = current_state()
        if st is None or value is None or value is False:
            return  # shell completion (no state), or the option was not given here
        setattr(st, field, value)
        if field == "log_level":
            configure_logging(value)

    return callback


def _global_options(*, hidden: bool) -> list[click.Option]:
    """The global options: on the root (shown in `zeroclaw --help`) or as a subcommand's
    hidden copies (defaults None, so only an explicit value writes into the state)."""

    def opt(decls: list[str], field: str, **kw: Any) -> click.Option:
        if hidden:
            decls = [*decls[:-1], f"_global_{field}"]  # never a command's own parameter
            kw = {k: v for k, v in kw.items() if k not in ("default", "show_default")}
            kw |= {"hidden": True, "expose_value": False, "callback": _set_global(field)}
            if kw.get("is_flag"):
                kw["default"] = False
            return click.Option(decls, **kw)
        return click.Option(decls, **kw)

    return [
        opt(
            ["--config", "config_path"],
            "config_path",
            metavar="PATH",
            help="Config file. Default: $ZEROCLAW_CONFIG, $XDG_CONFIG_HOME/zeroclaw/"
            "zeroclaw.toml, then /etc/zeroclaw/zeroclaw.toml.",
        ),
        opt(
            ["--agent", "-a", "agent"],
            "agent",
            metavar="ALIAS",
            help="The agent a command talks to.",
        ),
        opt(["--json", "as_json"], "json", is_flag=True, help="Machine-readable JSON output."),
        opt(
            ["--debug", "debug"], "debug", is_flag=True, help="Show tracebacks for internal errors."
        ),
        opt(
            ["--log-level", "log_level"],
            "log_level",
            type=click.Choice(LOG_LEVELS),
            default="warning",
            show_default=True,
            help="Log level for this command.",
        ),
    ]


def _add_global_options(command: click.Command) -> None:
    taken = {name for p in command.params for name in (*p.opts, *p.secondary_opts)}
    for option in _global_options(hidden=True):
        if taken.isdisjoint(option.opts):  # the command's own option of that name wins
            command.params.append(option)


class GlobalCommand(click.Command):
    """A subcommand that also accepts the global options after its name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _add_global_options(self)


class GlobalGroup(click.Group):
    """A command group (`memory`, `agents`, ...) whose commands, and itself, accept the
    global options after their names."""

    command_class = GlobalCommand
    group_class = type  # nested groups are GlobalGroups too

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _add_global_options(self)


def json_in_args(command: click.Command, args: Sequence[str]) -> bool:
    """Whether a command line asks for --json, read without parsing it (a usage error stops
    click's parser before it reaches a later --json): walks the tokens as click would,
    skipping option values so that `chat -m --json` is a message, not the flag."""
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            return False
        if token.startswith("--"):
            name, eq, _ = token.partition("=")
            if name == "--json" and not eq:
                return True
            option = _option(command, name)
            if option is not None and not eq and _takes_value(option):
                i += option.nargs
        elif token.startswith("-") and len(token) > 1:
            option = _option(command, token[:2])
            if option is not None and len(token) == 2 and _takes_value(option):
                i += option.nargs
        elif isinstance(command, click.Group):
            sub = command.get_command(click.Context(command), token)
            if sub is not None:
                command = sub
    return False


def _option(command: click.Command, name: str) -> click.Option | None:
    for param in command.params:
        if isinstance(param, click.Option) and name in (*param.opts, *param.secondary_opts):
            return param
    return None


def _takes_value(option: click.Option) -> bool:
    return not option.is_flag and not option.count


# Every top-level command: the module that registers it (on import, through `@cli.command`)
# and its help's first paragraph. A command's module is imported only when that command
# runs, so `zeroclaw status` never pays for the agent code, trio or the config models
# (ADR 0035); `zeroclaw --help` lists them all from here. tests/cli/test_lazy_commands.py
# checks this table against the commands the modules really register.
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "agents": ("daemon_cmd", "List, start, stop and restart agents."),
    "approvals": (
        "approvals_cmd",
        "Approvals of outside senders' turns, waiting for the operator; no answer denies.",
    ),
    "chat": ("chat_cmd", "Talk to the agent named by the global --agent/-a."),
    "completion": ("completion_cmd", "Print the completion script for SHELL."),
    "config": ("config_cmd", "Validate, inspect and create the config file."),
    "daemon": ("daemon_cmd", "Run the supervisor in the foreground (systemd Type=notify)."),
    "discover": (
        "discover_cmd",
        "Find agents, adapters, capabilities, MCP servers, model servers and serial ports; "
        "decide each with a reason (ADR 0034).",
    ),
    "dispatch": (
        "subagents_cmd",
        "Hand sub-agent ID a task as the operator (caller `cli`) and wait for its end.",
    ),
    "doctor": (
        "doctor_cmd",
        "Check the config, files, daemon, stores, sandbox and unit; say what is wrong and the fix.",
    ),
    "events": (
        "events_cmd",
        "What the daemon did: agent transitions, routing refusals, reloads, memory operations.",
    ),
    "invocations": (
        "subagents_cmd",
        "Sub-agent invocations: their records and timelines; cancel a running one.",
    ),
    "mcp": (
        "mcp_cmd",
        "MCP servers, their state per agent, and their tools' pinned schemas.",
    ),
    "memory": (
        "memory_cmd",
        "Read and manage agents' memory (through the daemon, or directly without one).",
    ),
    "metrics": (
        "metrics_cmd",
        "Print the daemon's metrics in the Prometheus text format, exactly as the "
        "`[daemon] metrics_listen` HTTP listener serves them at /metrics.",
    ),
    "reload": ("daemon_cmd", "Validate the config file and apply what changed (like SIGHUP)."),
    "route": ("route_cmd", "Explain and probe agent-to-agent routing."),
    "schedules": (
        "schedules_cmd",
        "Scheduled turns: configured, heartbeats and agents' reminders; run, pause, resume.",
    ),
    "service": (
        "service_cmd",
        "Install, remove and inspect the systemd unit (system-wide, or --user).",
    ),
    "sessions": (
        "sessions_cmd",
        "Every agent's stored sessions, of every origin (operator, channel senders, peers).",
    ),
    "status": ("daemon_cmd", "Daemon pid, uptime, config, reload state, and every agent's state."),
    "stop": ("daemon_cmd", "Stop the daemon and every agent; waits until it has exited."),
    "subagents": (
        "subagents_cmd",
        "Loaded sub-agents, their manifests and revisions (read-only; needs the daemon).",
    ),
    "usage": (
        "usage_cmd",
        "What each agent spent, by origin: turns, provider steps, tokens and cost (at the "
        "config's prices), from the daemon's usage ledger.",
    ),
}


def load_all_commands() -> None:
    """Import every command module (the whole click tree, for a walk over it)."""
    for module, _ in LAZY_COMMANDS.values():
        importlib.import_module(f".{module}", __package__)


class _RootGroup(click.Group):
    """Turns every expected failure into a message and an exit code, never a traceback; with
    --json (anywhere on the line), into `{schema_version, ok: false, error: {code, message}}`
    on stdout as well, with the same exit code. Its commands load on first use
    (LAZY_COMMANDS)."""

    command_class = GlobalCommand
    group_class = GlobalGroup

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            importlib.import_module(f".{LAZY_COMMANDS[cmd_name][0]}", __package__)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """`zeroclaw --help` from the table: listing the commands loads none of them."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None:
                command = click.Command(name, help=LAZY_COMMANDS[name][1])
            if not command.hidden:
                rows.append((name, command))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in rows])

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[ARGV_KEY] = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            if exc.ctx is None:
                exc.ctx = ctx
            self._usage_error(ctx, exc)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            self._usage_error(ctx, exc)
            raise
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except ConfigError as exc:
            print_config_error(exc, _explicit_config(ctx))
            missing = any(issue.message.startswith("file not found") for issue in exc.issues)
            issues = [issue.as_json() for issue in exc.issues]
            code = "config_not_found" if missing else "config_invalid"
            self._json_error(ctx, code, "\n".join(exc.lines()), issues=issues)
            ctx.exit(EXIT_USAGE)
        except CliError as exc:
            message = with_config(str(exc), _explicit_config(ctx))
            click.echo(terminal_safe(f"zeroclaw: error: {message}"), err=True)
            self._json_error(ctx, exc.code, message)
            ctx.exit(exc.exit_code)
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly, like any Unix filter.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(141)
        except KeyboardInterrupt:
            click.echo("zeroclaw: interrupted", err=True)
            self._json_error(ctx, "interrupted", "interrupted")
            ctx.exit(130)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            if _debug(ctx):
                traceback.print_exc()
            else:
                click.echo(
                    f"zeroclaw: internal error: {message} (run with --debug for a traceback)",
                    err=True,
                )
            self._json_error(ctx, "internal", message)
            ctx.exit(EXIT_FAILED)

    def _usage_error(self, ctx: click.Context, exc: click.UsageError) -> None:
        """With --json: the usage error as JSON and exit 2 (click prints it on stderr)."""
        if not self._json_error(ctx, "usage", exc.format_message()):
            return
        exc.show()
        ctx.exit(EXIT_USAGE)

    def _json_error(self, ctx: click.Context, code: str, message: str, **extra: Any) -> bool:
        st = current_state()
        wanted = (st is not None and st.json) or json_in_args(self, ctx.meta.get(ARGV_KEY, ()))
        if not wanted:
            return False
        if st is None or not st.emitted:  # a command that printed its own JSON said it all
            emit_json(error_json(code, message, **extra))
        return True


def _explicit_config(ctx: click.Context) -> str | None:
    obj = ctx.find_root().obj
    return obj.config_path if isinstance(obj, CliState) else None


def _debug(ctx: click.Context) -> bool:
    obj = ctx.find_root().obj
    return isinstance(obj, CliState) and obj.debug


@click.group(
    cls=_RootGroup,
    params=_global_options(hidden=False),
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Global options may also follow any command: zeroclaw memory list --agent A --json.",
)
@click.version_option(__version__, "--version", "-V", prog_name="zeroclaw")
@click.pass_context
def cli(
    ctx: click.Context,
    config_path: str | None,
    agent: str | None,
    as_json: bool,
    debug: bool,
    log_level: str,
) -> None:
    """zeroclaw: a self-hosted multi-agent assistant daemon."""
    ctx.obj = CliState(config_path, agent, as_json, debug, log_level)
    configure_logging(log_level)


def main() -> None:
    cli(prog_name="zeroclaw")
