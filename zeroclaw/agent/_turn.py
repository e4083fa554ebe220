"""One turn of an agent: message in, tools under the risk profile, reply out.

The engine does not know where memory and peers live: a `Reach` gives it memory
operations and peer messaging (through the router in the daemon; the store directly and
"unavailable" peers when a CLI runs the agent in-process). Everything else — identity
files, the path and command policy, the action budget, approvals — is the same either way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import trio

from ..policy import check_path, rules_for
from ..policy._paths import GrantMode
from ..providers import Step, ToolCall, ToolOutcome, first_step, reply
from ..tools import ActionBudget, Approver, ToolResult, file_list, file_read, file_write, run_shell
from ._spec import AgentSpec

IDENTITY_FILES = ("IDENTITY.md", "SOUL.md", "AGENTS.md", "TOOLS.md", "USER.md")
MAX_IDENTITY_BYTES = 64 * 1024


class Reach(Protocol):
    """What an agent reaches beyond its own process."""

    async def memory(self, op: str, body: dict[str, Any]) -> ToolResult: ...

    async def message_peer(self, to: str, text: str, *, delegate: bool) -> ToolResult: ...


@dataclass
class TurnResult:
    reply: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"reply": self.reply, "tool_calls": self.tool_calls}


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def _grant_mode(mode: str) -> GrantMode:
    if mode in ("read", "write", "read_write"):
        return cast(GrantMode, mode)
    raise ValueError(f"unknown access mode {mode!r}")


def _number(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"expected a number, got {value!r}")


def system_prompt(workspace: str) -> str:
    """The agent's identity files, in a fixed order, each bounded."""
    parts = []
    for name in IDENTITY_FILES:
        path = Path(workspace) / name
        try:
            with open(path, "rb") as fh:
                text = fh.read(MAX_IDENTITY_BYTES).decode("utf-8", errors="replace")
        except OSError:
            continue
        parts.append(f"# {name}\n{text.strip()}")
    return "\n\n".join(parts)


class TurnEngine:
    def __init__(
        self,
        spec: AgentSpec,
        reach: Reach,
        *,
        agent_env: Mapping[str, str],
        other_workspaces: Sequence[str] = (),
        approver: Approver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.reach = reach
        self.agent_env = dict(agent_env)
        self.approver = approver
        self.clock = clock
        risk = spec.risk
        self.level = str(risk["level"])
        self.asks_approval = self.level == "supervised" and bool(
            risk["require_approval_for_medium_risk"]
        )
        self.block_high_risk = bool(risk["block_high_risk_commands"])
        self.allowed_commands = frozenset(_strings(risk["allowed_commands"]))
        self.rules = rules_for(
            spec.workspace,
            workspace_only=bool(risk["workspace_only"]),
            may_write=self.level != "readonly",
            forbidden=_strings(risk["forbidden_paths"]),
            grants=[
                (alias, path, _grant_mode(mode)) for alias, (path, mode) in spec.access.items()
            ],
            other_workspaces=other_workspaces,
        )
        self.budget = ActionBudget(int(_number(spec.runtime["max_actions_per_hour"])))
        self.max_iterations = int(_number(spec.runtime["max_tool_iterations"]))
        self.shell_timeout = _number(spec.runtime["shell_timeout_secs"])

    async def run_turn(self, text: str, *, session: str = "default") -> TurnResult:
        await self.reach.memory(
            "append_turn", {"session": session, "role": "user", "content": text}
        )
        identity = await trio.to_thread.run_sync(system_prompt, self.spec.workspace)
        step: Step = first_step(text, self.spec.alias, identity)
        calls: list[dict[str, Any]] = []
        iterations = 0
        while step.tool_calls and iterations < self.max_iterations:
            outcomes = []
            for call in step.tool_calls[: self.max_iterations - iterations]:
                iterations += 1
                result = await self._run_tool(call)
                outcomes.append(
                    ToolOutcome(
                        call,
                        result.ok,
                        result.output,
                        result.error_code,
                        result.detail,
                        result.data,
                    )
                )
                calls.append(
                    {
                        "name": call.name,
                        "args": call.args,
                        "ok": result.ok,
                        "error_code": result.error_code,
                    }
                )
            step = reply(outcomes)
        answer = step.text or ""
        await self.reach.memory(
            "append_turn", {"session": session, "role": "assistant", "content": answer}
        )
        return TurnResult(answer, calls)

    async def _run_tool(self, call: ToolCall) -> ToolResult:
        if not self.budget.take(self.clock()):
            return ToolResult.refused("rate_limited", "max_actions_per_hour reached")
        args = call.args
        name = call.name
        if name == "file_read":
            return await trio.to_thread.run_sync(file_read, self.rules, args["path"])
        if name == "file_list":
            return await trio.to_thread.run_sync(file_list, self.rules, args["path"])
        if name == "file_write":
            # The policy first: nobody is asked to approve what would be refused anyway.
            decision = check_path(self.rules, args["path"], "write")
            if not decision.allowed:
                return ToolResult.refused(decision.code or "path_not_allowed", decision.reason)
            # Writing is a medium-risk action: a supervised profile asks before doing it.
            if self.asks_approval and not await self._approved(f"write {args['path']}"):
                return ToolResult.refused("approval_denied", "the operator did not approve")
            return await trio.to_thread.run_sync(
                file_write, self.rules, args["path"], args["content"]
            )
        if name == "shell":
            return await run_shell(
                args["command"],
                rules=self.rules,
                allowed_commands=self.allowed_commands,
                may_run_shell=self.level != "readonly",
                block_high_risk=self.block_high_risk,
                asks_approval=self.asks_approval,
                approver=self.approver,
                timeout_secs=self.shell_timeout,
                agent_env=self.agent_env,
            )
        if name == "memory_store":
            return await self.reach.memory(
                "store", {"key": args["key"], "content": args["content"]}
            )
        if name == "memory_recall":
            return await self.reach.memory("recall", {"query": args["query"]})
        if name == "memory_forget":
            return await self.reach.memory("forget", {"key": args["key"]})
        if name == "send_message_to_peer":
            return await self.reach.message_peer(args["to"], args["text"], delegate=False)
        if name == "delegate":
            if args["to"] not in self.spec.delegates:
                return ToolResult.refused(
                    "delegation_not_allowed", f"{args['to']!r} is not in this agent's delegates"
                )
            return await self.reach.message_peer(args["to"], args["text"], delegate=True)
        return ToolResult(False, "", "unknown_tool", f"no tool {name!r}")

    async def _approved(self, what: str) -> bool:
        if self.approver is None:
            return False
        with trio.move_on_after(60):
            return await self.approver(what)
        return False
