"""How the daemon runs a discovered adapter for an agent (issue 15): as that agent would run
a shell command, from the agent's spec — its workspace as cwd, a private home under the
agent's command homes, the allowlisted environment (plus the variables the adapter's
manifest names), and a Landlock ruleset built from the agent's own path rules with the
agent's TCP rules and scopes (`for_agent`: the program is the daemon's child, outside the
agent's domain) — never with the daemon's wider view — under the intermediate, so that
nothing it starts outlives the call. Over HTTP (an HTTP adapter, an MCP server at an
endpoint) there is no process to confine: the daemon makes the request itself, only to an
endpoint the discovery service found in the agent's `allowed_endpoints` (ADR 0054), with
credentials from its own environment that the agent never holds. The discovery service
admits the call; this only runs it."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping

import trio

from .._process import DEFAULT_PATH, CannotStart, ProcessOutcome
from ..agent import AgentSpec, command_home_root, for_agent, path_rules
from ..discovery import (
    AdapterRun,
    AdapterRunner,
    ProbeOutcome,
    RunOutcome,
    ToolOutcome,
    run_probe,
)
from ..mcp import Launch, OneCall, OneHttpCall, call_once, call_once_http
from ..policy import PathRules, abi_version
from ..tools import adapter_ruleset, shell_environment
from ._environment import scrubbed_environment
from ._http_adapter import post


def adapter_runner(
    specs: Callable[[], Mapping[str, AgentSpec]], daemon_env: Mapping[str, str]
) -> AdapterRunner:
    """A runner over the daemon's current specs (`specs()` is read at each call: a reload
    may have changed the agent)."""

    async def run(agent: str, job: AdapterRun, /) -> RunOutcome:
        spec = specs().get(agent)
        if spec is None or spec.subagent is not None:
            return f"{agent} is not an agent that runs adapters"
        if job.transport == "http":
            return await post(job, daemon_env)
        if job.transport == "mcp_http":
            return await _call_http_tool(job)
        rules = path_rules(spec)
        workspace = str(rules.workspace)
        root = command_home_root(spec)
        if job.transport == "mcp_stdio":
            return await _call_tool(job, spec, rules, root, daemon_env)
        try:
            home = await trio.to_thread.run_sync(functools.partial(_private_home, root))
        except OSError as exc:
            return f"no private home for the adapter: {exc}"
        env = shell_environment(scrubbed_environment(daemon_env), workspace, home)
        env.update({name: daemon_env[name] for name in job.env_names if name in daemon_env})
        confine = spec.risk.sandbox != "none" and abi_version() >= 1
        agents = for_agent(spec)
        path = env.get("PATH", DEFAULT_PATH)
        program = shutil.which(job.argv[0], path=path)
        try:
            if program is None:
                return f"cannot start {job.argv[0]!r}: not on PATH"
            # Under the intermediate, as an MCP adapter's server and a probe: the daemon is
            # no subreaper, and what the program left (a child in its group once it exited
            # in time, a setsid child, a double fork) outlived the call, re-parented to init.
            ran = await run_probe(
                [program, *job.argv[1:]],
                timeout_secs=job.timeout_secs,
                env=env,
                cwd=workspace,
                output_cap=job.output_cap,
                ruleset=functools.partial(
                    adapter_ruleset, rules, program, path, home, agents.confinement
                )
                if confine
                else None,
                # Not a probe's (no socket at all): its agent's, which refuses IPv4/IPv6
                # sockets only to an agent with no port to reach.
                seccomp=agents.seccomp,
            )
        except CannotStart as exc:
            return exc.detail
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(
                    functools.partial(shutil.rmtree, home, ignore_errors=True)
                )
        return _process_outcome(job.argv[0], ran)

    return run


def _process_outcome(name: str, ran: ProbeOutcome) -> RunOutcome:
    """How the intermediate said the program `name` ended, as a CLI adapter's outcome; a
    program that never ran (the kernel refused it) is why, as text."""
    word, _, why = ran.status.partition(" ")
    if word in ("exec_refused", "exec_failed"):
        return f"cannot start {name!r}: {word} {why}"
    return ProcessOutcome(
        exit_code=-int(why) if word == "signal" and why.isdigit() else ran.exit_code,
        output=ran.output,
        truncated=ran.truncated,
        timed_out=ran.timed_out,
    )


async def _call_tool(
    job: AdapterRun,
    spec: AgentSpec,
    rules: PathRules,
    root: str,
    daemon_env: Mapping[str, str],
) -> ToolOutcome | str:
    """A registered MCP server's tool, the server started for this call as one of the
    agent's own would be (`zeroclaw.mcp.call_once`) and stopped after it."""
    try:
        await trio.to_thread.run_sync(functools.partial(os.makedirs, root, 0o700, True))
    except OSError as exc:
        return f"no private home for the MCP server: {exc}"
    agent_env = scrubbed_environment(daemon_env)
    agent_env.update({name: daemon_env[name] for name in job.env_names if name in daemon_env})
    result = await call_once(
        OneCall(
            Launch(
                name=job.server or "adapter",
                command=job.argv[0],
                args=job.argv[1:],
                env_names=job.env_names,
                timeout_secs=job.timeout_secs,
                max_result_bytes=job.output_cap,
                rules=rules,
                agent_env=agent_env,
                confine=spec.risk.sandbox != "none" and abi_version() >= 1,
                home_root=root,
                for_agent=for_agent(spec),
            ),
            tool=job.tool,
            arguments=job.arguments,
        )
    )
    return ToolOutcome(result.text, result.error or "", result.detail)


async def _call_http_tool(job: AdapterRun) -> ToolOutcome:
    """A registered MCP server's tool over streamable HTTP: one session for this call."""
    result = await call_once_http(
        OneHttpCall(
            name=job.server or "adapter",
            url=job.endpoint,
            timeout_secs=job.timeout_secs,
            max_result_bytes=job.output_cap,
            tool=job.tool,
            arguments=job.arguments,
        )
    )
    return ToolOutcome(result.text, result.error or "", result.detail)


def _private_home(root: str) -> str:
    os.makedirs(root, mode=0o700, exist_ok=True)
    return tempfile.mkdtemp(prefix="adapter-", dir=root)
