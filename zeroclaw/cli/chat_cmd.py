"""`zeroclaw --agent ALIAS chat -m TEXT`: one turn with an agent.

For now only in-process (no daemon running): the agent runs inside this command under the
same policy, with its memory straight from the store and no peers. Through the daemon, and
interactively, comes next.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ..agent import AgentSpec
from ..agent._local import LocalReach
from ..agent._turn import TurnEngine
from ..config import daemon_paths, workspace_path
from ..control import DaemonUnreachable, Status
from ..memory import MemoryService
from ..supervisor import agent_environment, build_specs
from ._app import cli
from ._common import EXIT_FAILED, EXIT_USAGE, CliError, emit_json, json_option, state, wants_json
from .daemon_cmd import control_client
from .memory_cmd import with_memory


@cli.command("chat")
@click.option("-m", "--message", metavar="TEXT", help="Send one message and print the reply.")
@click.option("--session", default="default", show_default=True, help="Continue this session.")
@json_option
def chat_cmd(message: str | None, session: str, as_json: bool) -> None:
    """Talk to the agent named by the global --agent/-a."""
    st = state()
    path, config = st.load()
    enabled = sorted(a for a, c in config.agents.items() if c.enabled)
    if not st.agent or st.agent not in enabled:
        which = f"no enabled agent {st.agent!r}" if st.agent else "which agent? pass --agent ALIAS"
        raise CliError(f"{which}; agents: {', '.join(enabled) or 'none'}", EXIT_USAGE)
    if message is None:
        raise CliError(
            "interactive chat is not built yet; send one message with -m TEXT", EXIT_USAGE
        )
    if _daemon_answers():
        raise CliError(
            "a daemon is running; chat through the daemon is not built yet "
            "(stop it to chat in-process)",
            EXIT_FAILED,
        )
    click.echo(
        f"zeroclaw: no daemon; running {st.agent} in-process (peers answer unavailable)", err=True
    )
    env = dict(os.environ)
    spec: AgentSpec = build_specs(config, env, path.parent)[st.agent]
    Path(spec.workspace).mkdir(mode=0o700, parents=True, exist_ok=True)
    paths = daemon_paths(config, env)
    others = [str(workspace_path(config, a, paths)) for a in config.agents if a != st.agent]
    alias = st.agent

    async def turn(service: MemoryService) -> dict[str, Any]:
        engine = TurnEngine(
            spec,
            LocalReach(service, alias),
            agent_env=agent_environment(spec, env),
            other_workspaces=others,
        )
        result = await engine.run_turn(message, session=session)
        return result.as_json()

    data = with_memory(config, turn)
    if wants_json(as_json):
        emit_json(data)
    else:
        for call in data["tool_calls"]:
            status = "ok" if call["ok"] else call["error_code"]
            click.echo(f"  [{call['name']}: {status}]", err=True)
        click.echo(data["reply"])
    sys.exit(0)


def _daemon_answers() -> bool:
    client = control_client(timeout=5)
    try:
        client.request(Status())
    except (DaemonUnreachable, OSError):
        return False
    return True
