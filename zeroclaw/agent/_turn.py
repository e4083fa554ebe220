"""One turn of an agent: message in, tools under the risk profile, reply out.

The engine does not know where memory and peers live: a `Reach` gives it memory
operations and peer messaging (through the router in the daemon; the store directly and
"unavailable" peers when a CLI runs the agent in-process). Nor does it know any tool: it
runs with a `Toolset` (the default one, or the callee's `peer_tools` for a peer's turn),
tells the provider that toolset's specs, and calls each tool as `run(ctx, args)`.
Everything else — identity files, the path and command policy, the action budget,
approvals — is the same either way.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import msgspec
import trio

from .._ops import CallRefused
from ..policy import abi_version
from ..providers import (
    Conversation,
    OnDelta,
    Provider,
    ProviderError,
    Round,
    Step,
    ToolCall,
    ToolOutcome,
    estimate_usage,
)
from ..tools import (
    DEFAULT_TOOLSET,
    SKILL_READ,
    ActionBudget,
    Approver,
    BadArguments,
    Reach,
    ShellSettings,
    ToolContext,
    ToolResult,
    Toolset,
    ask_approval,
)
from ..turns import (
    MEMORY_APPEND_TURNS,
    AppendTurnsArgs,
    Delta,
    PrefetchedContext,
    StepUsage,
    ToolCallRecord,
    ToolUsed,
    TurnArg,
    TurnStop,
    UsageReport,
    UsageVerdict,
)
from ._context import (
    SessionMarks,
    TurnContext,
    compact_session,
    context_request,
    fetch_context,
    prefetched_context,
)
from ._skills import skills_section, with_skills
from ._spec import AgentSpec, path_rules

log = logging.getLogger("zeroclaw.agent")

IDENTITY_FILES = ("IDENTITY.md", "SOUL.md", "AGENTS.md", "TOOLS.md", "USER.md")
MAX_IDENTITY_BYTES = 64 * 1024

# What a turn reports while it runs; the end (TurnDone) is the caller's to send.
OnEvent = Callable[[Delta | ToolUsed], Awaitable[None]]
# zeroclaw.config.MCP_TOOL_PREFIX (the agent does not import the config models): a call of
# an MCP tool this agent was not offered (issue 26).
MCP_TOOL_PREFIX = "mcp__"
STREAM_CHUNK = 48  # characters per delta when a provider did not stream itself


async def _no_event(event: Delta | ToolUsed) -> None:
    return None


@dataclass
class TurnResult:
    reply: str
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    error: str | None = None  # the provider failed: `reply` says so
    usage: list[StepUsage] = field(default_factory=list)  # each provider step, in order
    stopped: TurnStop | None = None  # ended by the daemon's word before the model's last

    def as_json(self) -> dict[str, object]:  # write-only: what a script reads
        data: dict[str, object] = {
            "reply": self.reply,
            "tool_calls": [msgspec.to_builtins(c) for c in self.tool_calls],
            "usage": [msgspec.to_builtins(u) for u in self.usage],
        }
        if self.error is not None:
            data["error"] = self.error
        if self.stopped is not None:
            data["stopped"] = self.stopped
        return data


class UsageMeter(Protocol):
    """Where a turn reports what each provider step used: the daemon's usage service
    (ADR 0057), which answers whether the turn may go on."""

    async def step(self, report: UsageReport) -> UsageVerdict:
        """A step after which the turn goes on (its tools ran): the daemon's verdict."""
        ...

    def post(self, report: UsageReport) -> None:
        """A step nobody waits for (the turn's last, or one of a turn no budget applies
        to): posted."""
        ...


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


def not_granted(name: str, toolset: Toolset) -> ToolResult:
    """The refusal of a known tool outside this turn's toolset, before it is checked or
    counted."""
    return ToolResult.refused(
        "tool_not_granted",
        f"{name} is not in this turn's tools ({toolset.name}); it cannot be used",
    )


class TurnEngine:
    def __init__(
        self,
        spec: AgentSpec,
        reach: Reach,
        provider: Provider,
        *,
        agent_env: Mapping[str, str],
        toolset: Toolset = DEFAULT_TOOLSET,
        clock: Callable[[], float] = time.monotonic,
        approval_timeout: float | None = None,
        command_home_root: str | None = None,
    ) -> None:
        self.spec = spec
        self.reach = reach
        self.provider = provider
        self.clock = clock
        # The profile's, unless a test gives its own.
        self.approval_timeout = (
            spec.risk.approval_timeout_secs if approval_timeout is None else approval_timeout
        )
        # The tools of the operator's chat, and the subset a peer's turn gets (ADR 0015).
        self.toolset = toolset
        self.peer_toolset = toolset.only(spec.peer_tools, "peer_tools")
        risk = spec.risk
        self.budget = ActionBudget(spec.runtime.max_actions_per_hour)
        self.max_iterations = spec.runtime.max_tool_iterations
        self.shell = ShellSettings(
            allowed_commands=frozenset(risk.allowed_commands),
            may_run_shell=risk.may_act,
            block_high_risk=risk.block_high_risk_commands,
            timeout_secs=spec.runtime.shell_timeout_secs,
            agent_env=dict(agent_env),
            # Each command under its own Landlock ruleset wherever the kernel and profile allow.
            confine=risk.sandbox != "none" and abi_version() >= 1,
            home_root=command_home_root,
        )
        self.set_other_workspaces(spec.other_workspaces)
        # What a turn waits for before it takes its toolset: the agent's MCP servers' first
        # start (issue 26), so a message right after the agent's start sees their tools.
        self.tools_pending: Callable[[], Awaitable[None]] | None = None
        # Why the MCP host does not offer a tool it knows (a readonly agent and a tool not
        # read-only): the refusal, else None (zeroclaw.mcp.McpHost.explain).
        self.mcp_explain: Callable[[str], ToolResult | None] | None = None
        # Sessions whose last turn's transcript append is still on its way (see run_turn).
        self._saving: dict[str, trio.Event] = {}
        # What this process last wrote to each session: whether a context the daemon read
        # ahead of a turn is current (ADR 0068).
        self.marks = SessionMarks()
        # The skills listing (ADR 0056), told to a turn that may read them with skill_read.
        self.skills_prompt = skills_section(spec.skills)
        # Where each provider step is reported (the daemon's usage service); None: nowhere
        # (a CLI running the agent in-process).
        self.meter: UsageMeter | None = None

    def set_toolset(self, toolset: Toolset) -> None:
        """A new toolset for the turns that start from now on (the agent's MCP servers
        offered tools, or changed them); a running turn keeps the one it started with."""
        self.toolset = toolset
        self.peer_toolset = toolset.only(self.spec.peer_tools, "peer_tools")

    async def tools_ready(self) -> None:
        """Until the toolset is complete (`tools_pending`, bounded by its owner)."""
        if self.tools_pending is not None:
            await self.tools_pending()

    def origin_toolset(self, granted: tuple[str, ...] | None) -> Toolset:
        """The toolset of a turn the daemon opened: all of this engine's (None: the
        operator, a dispatch) or only the tools the daemon granted its origin (ADR 0042)."""
        if granted is None:
            return self.toolset
        return self.toolset.only(granted, "origin_tools")

    def peer_origin_toolset(self, granted: tuple[str, ...] | None) -> Toolset:
        """A peer's turn: `peer_toolset`, and of it only what the origin that started the
        chain was granted (None: the operator's or a dispatch's chain, not narrowed)."""
        if granted is None:
            return self.peer_toolset
        return self.peer_toolset.only(granted, "peer_tools")

    def set_other_workspaces(self, other_workspaces: Sequence[str]) -> None:
        """The path rules, rebuilt when a reload changed the other agents' workspaces."""
        self.rules = path_rules(self.spec, tuple(other_workspaces))

    async def run_turn(
        self,
        text: str,
        *,
        session: str = "default",
        on_event: OnEvent = _no_event,
        approver: Approver | None = None,
        depth: int = 0,
        toolset: Toolset | None = None,
        on_answer: Callable[[TurnResult], None] | None = None,
        turn_id: str | None = None,
        prefetched: Callable[[], Awaitable[PrefetchedContext | None]] | None = None,
        budgeted: bool = True,
    ) -> TurnResult:
        """One turn. `approver` belongs to the channel that started it (None: nobody to ask,
        so supervised medium-risk actions are denied); `depth` counts the asks and
        delegations that led here; `toolset` is what it may use (None: this engine's
        toolset; a peer's turn gets `peer_toolset`). The transcript gets this turn only
        once it completed.

        `on_answer` hears the result as soon as it is known, before the transcript append
        is answered (its commit is durable, so it takes a while): the daemon's runtime
        sends the reply from there (ADR 0038). The next turn of the same session in this
        engine waits for that append before it reads the history, so a session never
        misses its own last turn.

        What the turn is given from memory (the session's history by the agent's token
        budget, its summary, recalled records) comes in one request before the first model
        call; a compaction the session is due for runs after the transcript append, before
        the session's next turn (ADR 0059). `prefetched`: that request's answer as the
        daemon read it for this turn, awaited while the identity files are read; taken
        when it answers the same request and shows this session's last append and
        compaction, else asked for again (ADR 0068).
        `budgeted`: False when the daemon said no budget applies to the turn: its steps'
        usage is posted, not waited for (ADR 0068)."""
        tools = self.toolset if toolset is None else toolset
        spans = _Spans()
        identity = ""
        saving = self._saving.get(session)
        if saving is not None:
            await saving.wait()

        async def read_identity() -> None:
            nonlocal identity
            identity = await trio.to_thread.run_sync(system_prompt, self.spec.workspace)

        request = context_request(self.spec.memory, session, text, tools)
        async with trio.open_nursery() as nursery:  # identity and memory side by side
            nursery.start_soon(read_identity)
            ahead = None if prefetched is None else await prefetched()
            context = prefetched_context(ahead, request, self.marks)
            if context is None:
                context = await fetch_context(self.reach, request)
        spans.mark("setup")
        if SKILL_READ in tools:
            identity = with_skills(identity, self.skills_prompt)
        conversation = Conversation(
            self.spec.alias,
            identity,
            context.history,
            text,
            tools=tools.specs,
            memories=context.memories,
            recap=context.recap,
            cut=context.cut,
        )
        ctx = ToolContext(
            rules=self.rules,
            shell=self.shell,
            reach=self.reach,
            asks_approval=self.spec.risk.asks_approval,
            approver=self._bounded(approver),
            delegates=frozenset(self.spec.delegates),
            depth=depth,
            session=session,
            turn=turn_id,
        )
        calls: list[ToolCallRecord] = []
        usage: list[StepUsage] = []
        stopped: UsageVerdict | None = None
        iterations = 0
        try:
            step = await self._complete(conversation, on_event, usage)
            spans.mark("provider")
            while step.tool_calls and iterations < self.max_iterations:
                outcomes = []
                for call in step.tool_calls[: self.max_iterations - iterations]:
                    iterations += 1
                    result = await self._run_tool_guarded(call, ctx, tools)
                    spans.mark("tools")
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
                    calls.append(ToolCallRecord(call.name, call.args, result.ok, result.error_code))
                    await on_event(ToolUsed(call.name, call.args, result.ok, result.error_code))
                conversation.rounds.append(Round(step, tuple(outcomes)))
                verdict = await self._metered(turn_id, usage[-1], budgeted)
                if verdict.stop:  # a budget of this turn is spent: no further step
                    stopped = verdict
                    break
                step = await self._complete(conversation, on_event, usage)
                spans.mark("provider")
        except ProviderError as exc:
            message = f"error: {exc}"
            await on_event(Delta(message))
            failed = TurnResult(message, calls, error=str(exc), usage=usage)
            if on_answer is not None:
                on_answer(failed)
            return failed
        answer = step.text or ""
        if stopped is not None:
            answer = f"(stopped: budget_exceeded: {stopped.detail})"
            step = Step(text=answer)
        elif step.tool_calls:  # the provider still wanted tools after max_tool_iterations
            answer = answer or f"(stopped after {self.max_iterations} tool calls)"
        if not step.streamed:
            for start in range(0, len(answer), STREAM_CHUNK):
                await on_event(Delta(answer[start : start + STREAM_CHUNK]))
        if stopped is None and usage and self.meter is not None and turn_id is not None:
            # Before the answer: the daemon hears of the step while the turn is its own.
            self.meter.post(UsageReport(turn_id, usage[-1], last=True))
        finished = TurnResult(
            answer,
            calls,
            usage=usage,
            stopped="budget_exceeded" if stopped is not None else None,
        )
        if on_answer is not None:
            on_answer(finished)
        saved_event = self._saving[session] = trio.Event()
        saved: CallRefused | None = None
        try:
            try:
                appended = await self.reach.memory(
                    MEMORY_APPEND_TURNS,
                    AppendTurnsArgs(
                        session=session,
                        turns=[TurnArg("user", text), TurnArg("assistant", answer)],
                    ),
                )
                self.marks.appended(session, appended.seq)
            except CallRefused as refused:
                saved = refused
            if context.overflow and stopped is None:  # the next turn waits for it too
                await self._compact(session, context, tools, turn_id)
        finally:
            saved_event.set()
            if self._saving.get(session) is saved_event:
                del self._saving[session]
        spans.mark("save")
        spans.log(self.spec.alias)
        if saved is not None:  # the answer stands; say loudly that the session lost it
            log.error(
                "agent %s: session %r not saved: %s %s",
                self.spec.alias,
                session,
                saved.code,
                saved.detail,
            )
        return finished

    async def _complete(
        self, conversation: Conversation, on_event: OnEvent, usage: list[StepUsage]
    ) -> Step:
        """One provider step, its usage noted (estimated when the server reported none)."""
        step = await self.provider.complete(conversation, _deltas(on_event))
        tokens = step.usage or estimate_usage(conversation, step)
        usage.append(StepUsage(step.provider or self.provider.name, tokens, step.failed))
        return dataclasses.replace(step, usage=tokens)

    async def _metered(self, turn: str | None, step: StepUsage, budgeted: bool) -> UsageVerdict:
        """The daemon's word on a step after which the turn would go on; posted, and "go
        on", when no budget applies to the turn (the daemon said so as it opened it)."""
        if self.meter is None or turn is None:
            return UsageVerdict()
        if not budgeted:
            self.meter.post(UsageReport(turn, step))
            return UsageVerdict()
        return await self.meter.step(UsageReport(turn, step))

    async def _compact(
        self, session: str, context: TurnContext, tools: Toolset, turn: str | None
    ) -> None:
        """The session's due compaction, by this agent's own provider; its facts are kept
        only as far as this turn could have stored them (`memory_store`, a profile that
        writes). Its summary step is metered like the turn's (not after a budget stopped
        the turn: then the turns are kept until a later turn)."""

        def metered(step: StepUsage) -> None:
            if self.meter is not None and turn is not None:
                self.meter.post(UsageReport(turn, step, last=True, compaction=True))

        done = await compact_session(
            self.reach,
            self.provider,
            self.spec.alias,
            self.spec.memory,
            session,
            context,
            keep_facts="memory_store" in tools and self.spec.risk.may_act,
            on_step=metered,
        )
        if done is not None:
            self.marks.compacted(session, done.summary.through_seq)

    async def _run_tool_guarded(
        self, call: ToolCall, ctx: ToolContext, tools: Toolset
    ) -> ToolResult:
        """The last resort: a tool that raises (a bug, an OS error nobody mapped) fails
        that call with `internal_error`, logged here once with its traceback, and the
        agent lives on. Cancellation is not an Exception and passes through."""
        try:
            result = await self._run_tool(call, ctx, tools)
        except Exception as exc:
            log.exception("agent %s: tool %s raised", self.spec.alias, call.name)
            result = ToolResult(
                False, "", "internal_error", f"{call.name} failed: {type(exc).__name__}"
            )
        if log.isEnabledFor(logging.DEBUG):
            # The decision only: arguments, output and detail may carry what the user wrote.
            log.debug(
                "agent %s: tool %s %s",
                self.spec.alias,
                call.name,
                "allowed" if result.ok else f"refused ({result.error_code})",
                extra={
                    "alias": self.spec.alias,
                    "tool": call.name,
                    "allowed": result.ok,
                    "code": result.error_code,
                },
            )
        return result

    async def _run_tool(self, call: ToolCall, ctx: ToolContext, tools: Toolset) -> ToolResult:
        """In this order: granted, arguments, budget, then the tool's own checks."""
        tool = tools.get(call.name)
        if tool is None:
            if call.name in self.toolset:
                return not_granted(call.name, tools)
            if call.name.startswith(MCP_TOOL_PREFIX):
                return self._mcp_not_offered(call.name)
            return ToolResult(False, "", "bad_arguments", f"no tool {call.name!r}")
        try:
            args = tool.decode(call.args)
        except BadArguments as exc:
            return ToolResult(False, "", "bad_arguments", str(exc))
        if not self.budget.take(self.clock()):
            return ToolResult.refused("rate_limited", "max_actions_per_hour reached")
        return await tool.run(ctx, args)

    def _mcp_not_offered(self, name: str) -> ToolResult:
        """An MCP tool not in the toolset: allowed by the config but its server is not
        ready (it never listed it, or withheld it), or not allowed at all."""
        if self.mcp_explain is not None and (why := self.mcp_explain(name)) is not None:
            return why
        allowed = {
            f"{MCP_TOOL_PREFIX}{server.name}__{tool}"
            for server in self.spec.mcp_servers
            for tool in server.tools
        }
        if name in allowed:
            return ToolResult.refused(
                "mcp_unavailable", f"{name}: its server has not offered it (not ready?)"
            )
        return ToolResult.refused("mcp_tool_not_allowed", f"{name} is not offered to this agent")

    def _bounded(self, approver: Approver | None) -> Approver | None:
        """The approver with this engine's timeout (a timeout is a denial)."""
        if approver is None:
            return None

        async def bounded(what: str) -> bool:
            return await self._approved(approver, what)

        return bounded

    async def _approved(self, approver: Approver | None, what: str) -> bool:
        """Timeout or no interactive channel is a denial."""
        return await ask_approval(approver, what, self.approval_timeout)


class _Spans:
    """Where one turn's time went (perf_counter spans, summed by name), logged at debug:
    the figure that shows a regression in the turn's own overhead. Next to nothing when
    debug is off."""

    def __init__(self) -> None:
        self.on = log.isEnabledFor(logging.DEBUG)
        self.last = time.perf_counter() if self.on else 0.0
        self.spans: dict[str, float] = {}

    def mark(self, name: str) -> None:
        if self.on:
            now = time.perf_counter()
            self.spans[name] = self.spans.get(name, 0.0) + now - self.last
            self.last = now

    def log(self, alias: str) -> None:
        if self.on:
            ms = {k: round(v * 1000, 3) for k, v in self.spans.items()}
            log.debug(
                "agent %s: turn spans %s",
                alias,
                " ".join(f"{k}={v}ms" for k, v in ms.items()),
                extra={"alias": alias, "spans_ms": ms},
            )


def _deltas(on_event: OnEvent) -> OnDelta:
    async def on_delta(text: str) -> None:
        await on_event(Delta(text))

    return on_delta
