"""One turn of an agent: message in, tools under the risk profile, reply out.

The engine does not know where memory and peers live: a `Reach` gives it memory
operations and peer messaging (through the router in the daemon; the store directly and
"unavailable" peers when a CLI runs the agent in-process). Everything else — identity
files, the path and command policy, the action budget, approvals — is the same either way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import trio

from ..policy import abi_version, check_path, rules_for
from ..policy._paths import GrantMode
from ..providers import (
    Conversation,
    HistoryTurn,
    OnDelta,
    Provider,
    ProviderError,
    Round,
    ToolCall,
    ToolOutcome,
    bad_arguments,
)
from ..tools import ActionBudget, Approver, ToolResult, file_list, file_read, file_write, run_shell
from ._spec import AgentSpec

log = logging.getLogger("zeroclaw.agent")

IDENTITY_FILES = ("IDENTITY.md", "SOUL.md", "AGENTS.md", "TOOLS.md", "USER.md")
MAX_IDENTITY_BYTES = 64 * 1024


class Reach(Protocol):
    """What an agent reaches beyond its own process."""

    async def memory(self, op: str, body: dict[str, Any]) -> ToolResult: ...

    async def message_peer(
        self, to: str, text: str, *, delegate: bool, depth: int
    ) -> ToolResult: ...


OnEvent = Callable[[dict[str, Any]], Awaitable[None]]
HISTORY_TURNS = 40  # earlier turns of the session given to the provider
MAX_DELEGATION_DEPTH = 3  # asks/delegations in a chain before the next one is refused
STREAM_CHUNK = 48  # characters per delta when a provider did not stream itself


async def _no_event(event: dict[str, Any]) -> None:
    return None


@dataclass
class TurnResult:
    reply: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # the provider failed: `reply` says so

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"reply": self.reply, "tool_calls": self.tool_calls}
        if self.error is not None:
            data["error"] = self.error
        return data


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


def render_memory(op: str, data: dict[str, Any]) -> str:
    """A memory result as the model reads it."""
    if op == "recall":
        return "\n".join(f"[{h['agent']}] {h['key']}: {h['content']}" for h in data.get("hits", []))
    if op == "store":
        return f"stored {data['record']['key']}"
    return ""


def not_granted(name: str, tools: frozenset[str] | None) -> ToolResult | None:
    """The refusal of a tool this turn was not granted, before it is checked or counted."""
    if tools is None or name in tools:
        return None
    return ToolResult.refused(
        "tool_not_granted", f"{name} is not in this agent's peer_tools; a peer cannot use it"
    )


class TurnEngine:
    def __init__(
        self,
        spec: AgentSpec,
        reach: Reach,
        provider: Provider,
        *,
        agent_env: Mapping[str, str],
        clock: Callable[[], float] = time.monotonic,
        approval_timeout: float = 60.0,
        command_home_root: str | None = None,
    ) -> None:
        self.spec = spec
        self.command_home_root = command_home_root
        self.reach = reach
        self.provider = provider
        self.agent_env = dict(agent_env)
        self.clock = clock
        self.approval_timeout = approval_timeout
        risk = spec.risk
        self.level = str(risk["level"])
        self.asks_approval = self.level == "supervised" and bool(
            risk["require_approval_for_medium_risk"]
        )
        self.block_high_risk = bool(risk["block_high_risk_commands"])
        self.allowed_commands = frozenset(_strings(risk["allowed_commands"]))
        self.set_other_workspaces(spec.other_workspaces)
        self.budget = ActionBudget(int(_number(spec.runtime["max_actions_per_hour"])))
        self.max_iterations = int(_number(spec.runtime["max_tool_iterations"]))
        self.shell_timeout = _number(spec.runtime["shell_timeout_secs"])
        # Each command under its own Landlock ruleset wherever the kernel and profile allow.
        self.confine_commands = risk.get("sandbox", "auto") != "none" and abi_version() >= 1

    def set_other_workspaces(self, other_workspaces: Sequence[str]) -> None:
        """The path rules, rebuilt when a reload changed the other agents' workspaces."""
        risk = self.spec.risk
        self.rules = rules_for(
            self.spec.workspace,
            workspace_only=bool(risk["workspace_only"]),
            may_write=self.level != "readonly",
            forbidden=_strings(risk["forbidden_paths"]),
            grants=[
                (alias, path, _grant_mode(mode)) for alias, (path, mode) in self.spec.access.items()
            ],
            other_workspaces=other_workspaces,
            protected=self.spec.protected_paths,
        )

    async def run_turn(
        self,
        text: str,
        *,
        session: str = "default",
        on_event: OnEvent = _no_event,
        approver: Approver | None = None,
        depth: int = 0,
        tools: frozenset[str] | None = None,
    ) -> TurnResult:
        """One turn. `approver` belongs to the channel that started it (None: nobody to ask,
        so supervised medium-risk actions are denied); `depth` counts the asks and
        delegations that led here; `tools` limits the tools it may use (None: all; a peer's
        turn gets the callee's `peer_tools`). The transcript gets this turn only once it
        completed."""
        identity = ""

        async def read_identity() -> None:
            nonlocal identity
            identity = await trio.to_thread.run_sync(system_prompt, self.spec.workspace)

        async with trio.open_nursery() as nursery:  # identity and transcript side by side
            nursery.start_soon(read_identity)
            history = await self._history(session)
        conversation = Conversation(self.spec.alias, identity, history, text)
        calls: list[dict[str, Any]] = []
        iterations = 0
        try:
            step = await self.provider.complete(conversation, _deltas(on_event))
            while step.tool_calls and iterations < self.max_iterations:
                outcomes = []
                for call in step.tool_calls[: self.max_iterations - iterations]:
                    iterations += 1
                    result = not_granted(call.name, tools) or await self._run_tool_guarded(
                        call, approver, depth
                    )
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
                    record = {
                        "name": call.name,
                        "args": call.args,
                        "ok": result.ok,
                        "error_code": result.error_code,
                    }
                    calls.append(record)
                    await on_event({"event": "tool", **record})
                conversation.rounds.append(Round(step, tuple(outcomes)))
                step = await self.provider.complete(conversation, _deltas(on_event))
        except ProviderError as exc:
            message = f"error: {exc}"
            await on_event({"event": "delta", "text": message})
            return TurnResult(message, calls, error=str(exc))
        answer = step.text or ""
        if step.tool_calls:  # the provider still wanted tools after max_tool_iterations
            answer = answer or f"(stopped after {self.max_iterations} tool calls)"
        if not step.streamed:
            for start in range(0, len(answer), STREAM_CHUNK):
                await on_event({"event": "delta", "text": answer[start : start + STREAM_CHUNK]})
        saved = await self.reach.memory(
            "append_turns",
            {
                "session": session,
                "turns": [
                    {"role": "user", "content": text},
                    {"role": "assistant", "content": answer},
                ],
            },
        )
        if not saved.ok:  # the answer stands; say loudly that the session lost it
            log.error(
                "agent %s: session %r not saved: %s %s",
                self.spec.alias,
                session,
                saved.error_code,
                saved.detail,
            )
        return TurnResult(answer, calls)

    async def _history(self, session: str) -> tuple[HistoryTurn, ...]:
        result = await self.reach.memory("session", {"session": session, "limit": HISTORY_TURNS})
        turns = result.data.get("turns", []) if result.ok else []
        return tuple(
            HistoryTurn(t["role"], t["content"])
            for t in turns
            if t["role"] in ("user", "assistant")
        )

    async def _run_tool_guarded(
        self, call: ToolCall, approver: Approver | None, depth: int
    ) -> ToolResult:
        """The last resort: a tool that raises (a bug, an OS error nobody mapped) fails
        that call with `internal_error`, logged here once with its traceback, and the
        agent lives on. Cancellation is not an Exception and passes through."""
        try:
            return await self._run_tool(call, approver, depth)
        except Exception as exc:
            log.exception("agent %s: tool %s raised", self.spec.alias, call.name)
            return ToolResult(
                False, "", "internal_error", f"{call.name} failed: {type(exc).__name__}"
            )

    async def _run_tool(self, call: ToolCall, approver: Approver | None, depth: int) -> ToolResult:
        problem = bad_arguments(call.name, call.args)
        if problem is not None:
            return ToolResult(False, "", "bad_arguments", problem)
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
            if self.asks_approval and not await self._approved(approver, f"write {args['path']}"):
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
                approver=self._bounded(approver),
                timeout_secs=self.shell_timeout,
                agent_env=self.agent_env,
                confine=self.confine_commands,
                home_root=self.command_home_root,
            )
        if name == "memory_store":
            return await self.reach.memory(
                "store", {"key": args["key"], "content": args["content"]}
            )
        if name == "memory_recall":
            return await self.reach.memory("recall", {"query": args["query"]})
        if name == "memory_forget":
            return await self.reach.memory("forget", {"key": args["key"]})
        delegate = name == "delegate"
        if delegate and args["to"] not in self.spec.delegates:
            return ToolResult.refused(
                "delegation_not_allowed", f"{args['to']!r} is not in this agent's delegates"
            )
        if depth + 1 >= MAX_DELEGATION_DEPTH:
            return ToolResult.refused(
                "delegation_not_allowed",
                f"a chain of {MAX_DELEGATION_DEPTH} asks/delegations is the limit",
            )
        return await self.reach.message_peer(
            args["to"], args["text"], delegate=delegate, depth=depth + 1
        )

    def _bounded(self, approver: Approver | None) -> Approver | None:
        """The approver with this engine's timeout (a timeout is a denial)."""
        if approver is None:
            return None

        async def bounded(what: str) -> bool:
            return await self._approved(approver, what)

        return bounded

    async def _approved(self, approver: Approver | None, what: str) -> bool:
        """Timeout or no interactive channel is a denial."""
        if approver is None:
            return False
        with trio.move_on_after(self.approval_timeout):
            return await approver(what)
        return False


def _deltas(on_event: OnEvent) -> OnDelta:
    async def on_delta(text: str) -> None:
        await on_event({"event": "delta", "text": text})

    return on_delta
