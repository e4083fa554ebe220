"""`zeroclaw --agent ALIAS chat`: talk to an agent.

Through the daemon when one answers (the turn runs in the agent's own process, events
stream back over the control socket); otherwise the agent runs inside this command under
the same policy, with its memory straight from the store and no peers, and we say so.
Interactive by default (line editing and history via readline); `-m TEXT` sends one
message. Ctrl-C cancels the running turn, Ctrl-D leaves.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import msgspec

from .._terminal import terminal_safe
from ..control import (
    AgentsList,
    Chat,
    ChatApproval,
    ChatCancel,
    ChatOpen,
    ChatResult,
    ControlSession,
    DaemonUnreachable,
    Reply,
    UntrustedDaemon,
)
from ..turns import ApprovalAsked, Delta, ToolUsed, TurnEvent
from ._app import cli
from ._common import (
    EXIT_FAILED,
    EXIT_NO_DAEMON,
    EXIT_USAGE,
    CliError,
    emit_json,
    fallback,
    json_option,
    safe_echo,
    state,
    wants_json,
)
from .daemon_cmd import REFUSALS, DaemonRefused, call, control_client, refusal_error

if TYPE_CHECKING:
    from ..config import Config

# A turn: text in, events to the printer, the result (reply, tool_calls[, error]) out.
TurnRunner = Callable[[str, "Printer"], ChatResult]
REFUSAL_EXIT = {"unknown_agent": EXIT_USAGE}


class Printer:
    """Shows a turn as it happens: reply text streamed to stdout, tool activity and
    prompts on stderr. Quiet when the caller wants JSON."""

    def __init__(self, *, quiet: bool, interactive: bool) -> None:
        self.quiet = quiet
        self.interactive = interactive
        self._open_line = False
        self.shown = False  # whether any reply text reached the operator

    def event(self, event: TurnEvent) -> None:
        if self.quiet:
            return
        if isinstance(event, Delta):
            sys.stdout.write(terminal_safe(event.text))  # model (or outside) text
            sys.stdout.flush()
            self.shown = self.shown or bool(event.text)
            self._open_line = bool(event.text) and not event.text.endswith("\n")
        elif isinstance(event, ToolUsed):
            status = "ok" if event.ok else event.error_code
            self.end_line()
            safe_echo(f"  [{event.name}: {status}]", err=True)

    def approve(self, what: str, timeout: float | None) -> bool:
        """The inline y/N prompt, open for `timeout` seconds (the agent's approval timeout:
        after it the agent has denied, so a late "y" must not look like a yes); without a
        terminal, nobody can say yes."""
        if not self.interactive:
            return False
        self.end_line()
        limit = f" (denied in {timeout:g}s)" if timeout else ""
        safe_echo(f"  approve: {what}? [y/N]{limit}: ", err=True, nl=False)
        try:
            ready, _, _ = select.select([sys.stdin], [], [], timeout)
            if not ready:
                click.echo("\n  no answer in time: denied", err=True)
                return False
            answer = sys.stdin.readline()
        except (OSError, ValueError):
            return False
        return answer.strip().lower() in ("y", "yes")

    def end_line(self) -> None:
        if self._open_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._open_line = False


@cli.command("chat")
@click.option("-m", "--message", metavar="TEXT", help="Send one message and print the reply.")
@click.option("--session", default="default", show_default=True, help="Continue this session.")
@json_option
def chat_cmd(message: str | None, session: str, as_json: bool) -> None:
    """Talk to the agent named by the global --agent/-a."""
    st = state()
    path = st.locate()
    # Through a running daemon the file's raw TOML says enough (its runtime dir, whether it
    # enables the agent): no config models (ADR 0035). Anything else loads the full config,
    # which says what is wrong with it, or which agents there are.
    config: Config | None = None
    if st.light is None or st.agent not in st.light.enabled_agents:
        path, config = st.load()
        _check_agent(st.agent, config)
    if not 1 <= len(session.encode()) <= 128 or "\x00" in session:
        raise CliError("--session must be 1..128 bytes of text", EXIT_USAGE)
    if ":" in session:  # the daemon's rule too (ADR 0041): those are other origins' sessions
        raise CliError(
            "--session cannot hold ':': such names are other origins' sessions "
            "(read them with `zeroclaw sessions show`)",
            EXIT_USAGE,
        )
    json_out = wants_json(as_json)
    if json_out and message is None:
        raise CliError("--json needs -m TEXT (one message, one JSON answer)", EXIT_USAGE)
    alias = st.agent
    assert alias is not None  # checked: by the light read or the full config
    tty = sys.stdin.isatty()
    with contextlib.ExitStack() as stack:
        try:
            conn = stack.enter_context(control_client().session(timeout=None))
            if message is None:
                _open_session(conn, alias)
            runner: TurnRunner = _through_daemon(conn, alias, session, tty)
        except UntrustedDaemon as exc:
            raise DaemonRefused(str(exc)) from None
        except DaemonUnreachable:
            if config is None:  # the agent runs here: the whole config, validated
                path, config = st.load()
                _check_agent(alias, config)
            from ..config import daemon_paths  # the full config's paths, for its store

            runtime_dir = control_client().runtime_dir
            store = daemon_paths(config, os.environ).state_dir / "memory"
            runner, confined = _in_process(config, path, alias, session)
            how = "under Landlock" if confined else "without a sandbox"
            # Deliberately no MCP server here: their tool schemas are pinned by the daemon
            # (the rug-pull defence, ADR 0053), which is not running; their tools answer
            # mcp_unavailable, as a server that is not ready does.
            servers = config.agents[alias].mcp
            unstarted = (
                f"; its MCP servers ({', '.join(servers)}) are not started without the "
                "daemon, which pins their tool schemas: their tools answer mcp_unavailable"
                if servers
                else ""
            )
            fallback(
                "in_process",
                f"no daemon answers on {runtime_dir}",
                f"no daemon answers on {runtime_dir}; running {alias} in-process {how} with "
                f"the store at {store} (peers and sub-agents unavailable){unstarted}",
                store=str(store),
                runtime_dir=str(runtime_dir),
                **({"mcp_not_started": ",".join(servers)} if servers else {}),
            )
        if message is not None:
            printer = Printer(quiet=json_out, interactive=tty)
            try:
                result = runner(message, printer)
            except KeyboardInterrupt:
                printer.end_line()
                raise CliError("cancelled", EXIT_FAILED) from None
            printer.end_line()
            error = result.error
            if json_out:
                # Like the result's `error`, `ok` appears only when it says something.
                shown: dict[str, object] = msgspec.to_builtins(result)
                emit_json({"ok": False, **shown} if error else shown)
            elif error and not printer.shown:
                safe_echo(f"zeroclaw: error: {error}", err=True)  # never a silent failure
            sys.exit(EXIT_FAILED if error else 0)
        _interactive(runner, alias)


def _check_agent(alias: str | None, config: Config) -> None:
    enabled = sorted(a for a, c in config.agents.items() if c.enabled)
    if not alias or alias not in enabled:
        which = f"no enabled agent {alias!r}" if alias else "which agent? pass --agent ALIAS"
        raise CliError(f"{which}; agents: {', '.join(enabled) or 'none'}", EXIT_USAGE)


def _interactive(runner: TurnRunner, alias: str) -> None:
    printer = Printer(quiet=False, interactive=True)
    with _line_editing():
        while True:
            try:
                line = input(f"{alias}> ")
            except EOFError:  # Ctrl-D
                click.echo("", err=True)
                return
            except KeyboardInterrupt:  # Ctrl-C at the prompt: a fresh prompt, like a shell
                click.echo("", err=True)
                continue
            if not line.strip():
                continue
            try:
                result = runner(line, printer)
            except KeyboardInterrupt:
                result = ChatResult("", (), cancelled=True)
            except CliError as exc:
                if exc.exit_code == EXIT_NO_DAEMON:
                    raise  # the session is over
                printer.end_line()
                safe_echo(f"zeroclaw: {exc}", err=True)
                continue
            printer.end_line()
            if result.cancelled:
                click.echo("  [cancelled]", err=True)


@contextlib.contextmanager
def _line_editing() -> Iterator[None]:
    """readline editing and a history file that survives sessions (0600)."""
    try:
        import readline
    except ImportError:  # pragma: no cover - not on Linux
        yield
        return
    history = _history_file()
    with contextlib.suppress(OSError):
        readline.read_history_file(history)
    readline.set_history_length(1000)
    # A closing terminal sends SIGHUP (and `kill` SIGTERM): by default either ends the
    # process on the spot, losing the session's lines. Raised as SystemExit, they unwind
    # through the `finally` below, which saves them.
    previous = {signum: signal.getsignal(signum) for signum in HANGUP_SIGNALS}
    for signum in HANGUP_SIGNALS:
        signal.signal(signum, _exit_on_signal)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            history.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            readline.write_history_file(history)
            os.chmod(history, 0o600)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


HANGUP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)


def _history_file() -> Path:
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "zeroclaw" / "chat_history"


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _open_session(conn: ControlSession, alias: str) -> None:
    """Tell the daemon this connection is an interactive session, so however long the
    operator takes to type, it is never closed as idle."""
    conn.send(ChatOpen(agent=alias))
    try:
        reply = conn.next_reply()
    except (DaemonUnreachable, OSError):
        raise CliError("the daemon closed the connection", EXIT_NO_DAEMON) from None
    if not reply.ok and reply.error in REFUSALS:
        raise refusal_error(reply)
    if not reply.ok:
        raise _turn_refused(reply, alias)


def _turn_refused(reply: Reply[Any], alias: str) -> CliError:
    """The daemon would not run the turn; for an agent that is not running, why not (a
    provider it could not build is only in its last error)."""
    code = reply.error or "failed"
    message = f"{code}: {reply.message}"
    if code == "unavailable":
        with contextlib.suppress(CliError):
            listed = call(AgentsList(), timeout=10).data
            agent = next((a for a in listed.agents if a.alias == alias), None) if listed else None
            if agent is not None and agent.last_error:
                message += f" ({agent.state}: {agent.last_error})"
    return CliError(message, REFUSAL_EXIT.get(code, EXIT_FAILED), code=code)


def _through_daemon(conn: ControlSession, alias: str, session: str, tty: bool) -> TurnRunner:
    def send(request: Chat | ChatCancel | ChatApproval) -> None:
        try:
            conn.send(request)
        except OSError as exc:
            raise CliError(f"lost the daemon: {exc}", EXIT_NO_DAEMON) from None

    def run(text: str, printer: Printer) -> ChatResult:
        send(Chat(agent=alias, text=text, session=session, interactive=tty))
        cancelled = False
        while True:
            try:
                reply = conn.next_reply()
            except KeyboardInterrupt:
                if cancelled:
                    raise
                cancelled = True  # tell the agent; its last word still arrives
                send(ChatCancel())
                continue
            except (DaemonUnreachable, OSError):
                raise CliError("the daemon closed the connection", EXIT_NO_DAEMON) from None
            data = reply.data or {}
            if not reply.ok and reply.error in REFUSALS:
                raise refusal_error(reply)
            if not reply.ok:
                raise _turn_refused(reply, alias)
            if not reply.more:
                try:
                    return msgspec.convert(data, ChatResult)
                except msgspec.ValidationError as exc:
                    raise CliError(
                        f"not a chat result from the daemon: {exc}", EXIT_FAILED
                    ) from None
            try:
                event = msgspec.convert(data, TurnEvent)
            except msgspec.ValidationError:
                continue  # an event this CLI does not know (a newer daemon): not ours to show
            if isinstance(event, ApprovalAsked):
                send(ChatApproval(approved=printer.approve(event.what, event.timeout_secs)))
            else:
                printer.event(event)

    return run


def _in_process(config: Config, path: Path, alias: str, session: str) -> tuple[TurnRunner, bool]:
    # The agent's own code, only when the agent runs here (ADR 0035).
    import trio

    from ..agent import (
        AgentSpec,
        InProcessSandboxRequired,
        TurnEngine,
        confine_in_process,
    )
    from ..config import daemon_paths
    from ..memory import MemoryService
    from ..policy import code_roots, daemon_code_paths, inside_code
    from ..providers import ProviderError, make_chain
    from ..skills import load_catalogue
    from ..supervisor import agent_environment, build_specs
    from ..tools import DEFAULT_TOOLSET, agent_toolset
    from ._local_reach import LocalReach
    from .memory_cmd import with_memory

    env = dict(os.environ)
    # This process's own code, wherever the finder of an editable install maps it: readable
    # by the late imports after the sandbox, writable by no tool (ADR 0044).
    code = code_roots(daemon_code_paths())
    skills = load_catalogue(config, path)
    refused = [r.issue() for r in skills.refused if r.alias == alias]
    if refused:  # what the daemon refuses at its start, said before anything runs
        raise CliError(
            "\n".join(issue.format(str(path)) for issue in refused),
            EXIT_USAGE,
            code="config_invalid",
        )
    spec: AgentSpec = build_specs(
        config, env, path.parent, config_path=path, code_paths=code, skills=skills
    )[alias]
    held = inside_code(os.path.realpath(spec.workspace), code)
    if held is not None:  # what the daemon refuses at its start, said before anything runs
        raise CliError(
            f"agent {alias}'s workspace {spec.workspace} is inside this command's own code "
            f"{held}, which no agent may write (ADR 0044); `python -m zeroclaw` puts its cwd "
            "on sys.path: run the installed `zeroclaw` script, or `python -P -m zeroclaw`",
            EXIT_USAGE,
        )
    Path(spec.workspace).mkdir(mode=0o700, parents=True, exist_ok=True)
    agent_env = agent_environment(spec, env)
    # The daemon's agent's Landlock ruleset, applied to this process, plus the CLI's own
    # files: the store it reopens at every turn and the chat history (ADR 0039).
    state_dir = daemon_paths(config, env).state_dir
    own = (state_dir / "memory", state_dir / "memory.lock", _history_file().parent)
    try:
        confined = confine_in_process(spec, tuple(map(str, own))).in_force
    except InProcessSandboxRequired as exc:
        raise CliError(str(exc), EXIT_FAILED, code="sandbox_unavailable") from None

    def run(text: str, printer: Printer) -> ChatResult:
        async def turn(service: MemoryService) -> ChatResult | ProviderError:
            try:
                provider = make_chain(spec.provider_chain(), agent_env)
            except ProviderError as exc:
                return exc  # returned: raised in with_memory's nursery it would come wrapped
            engine = TurnEngine(
                spec,
                LocalReach(service, alias),
                provider,
                agent_env=agent_env,
                # Its skills, as the daemon's agent has them (ADR 0056).
                toolset=agent_toolset(
                    DEFAULT_TOOLSET,
                    dispatch_tools=False,
                    facades={},
                    skills=spec.skill_folders,
                ),
            )

            async def on_event(event: TurnEvent) -> None:
                printer.event(event)

            timeout = spec.risk.approval_timeout_secs

            async def approver(what: str) -> bool:
                return await trio.to_thread.run_sync(printer.approve, what, timeout)

            try:
                result = await engine.run_turn(
                    text, session=session, on_event=on_event, approver=approver
                )
            finally:
                await provider.aclose()
            calls = tuple(result.tool_calls)
            return ChatResult(
                result.reply,
                calls,
                result.error,
                sandbox_in_force=confined,
                usage=tuple(result.usage),
            )

        outcome = with_memory(config, turn)
        if isinstance(outcome, ProviderError):
            # What the daemon's agent would die of at its start (and `status` would show).
            raise CliError(
                f"agent {alias} cannot run: {outcome}", EXIT_FAILED, code="provider_unavailable"
            )
        return outcome

    return run, confined
