"""The control commands of `zeroclaw subagents`, `dispatch` and `invocations`: one handler
class per request, each built with the daemon's `SubagentsApi` and calling only it.

Handlers translate: requests into API calls, records into the control socket's replies.
The caller of an operator's dispatch is `cli` and its idempotency source `cli`, set here and
never read from the request: whoever may open the control socket is the operator (its peer
check and permissions say so). `register_subagent_commands` puts them all in the daemon's
command table in one line.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..control import (
    CommandTable,
    ControlErrorCode,
    Dispatch,
    DispatchRefusal,
    DispatchReply,
    Exchange,
    HandlerEntry,
    InvocationCancel,
    InvocationEvents,
    InvocationEventsReply,
    InvocationReply,
    InvocationShow,
    InvocationsList,
    InvocationsReply,
    RefusedBundle,
    Reply,
    RevisionInfo,
    RevisionsReply,
    SubagentDetail,
    SubagentRevisions,
    SubagentShow,
    SubagentsList,
    SubagentsReply,
    SubagentSummary,
    error_reply,
)
from ..turns import (
    TERMINAL_STATES,
    DispatchRefusalCode,
    Invocation,
    InvocationEvent,
    InvocationState,
    StateEntered,
)
from ._admission import DispatchRequest, Refused
from ._api import SubagentsApi
from ._records import CLI_CALLER, SCHEMA_VERSION

CLI_SOURCE = "cli"  # the idempotency scope of every operator dispatch
MAX_LIST_LIMIT = 1000


def _refusals_are_control_codes(code: DispatchRefusalCode) -> ControlErrorCode:
    return code  # mypy fails here if a refusal is no control code


LISTED_TEXT = 200  # characters of a task or reply a listing shows; `invocations show` has all


def listed(invocation: Invocation) -> Invocation:
    """A record as a listing shows it: no input or output (callers make them as big as a
    frame, and a listing of many must still fit in one reply), text cut short."""
    return msgspec.structs.replace(
        invocation,
        input=None,
        output=None,
        task=invocation.task[:LISTED_TEXT],
        reply=invocation.reply[:LISTED_TEXT],
        error_detail=invocation.error_detail[:LISTED_TEXT],
    )


def _not_found(agent_id: str) -> Reply[Any]:
    return error_reply("subagent_not_found", f"no sub-agent {agent_id!r}")


def _no_invocation(invocation_id: str) -> Reply[Any]:
    return error_reply("invocation_not_found", f"no invocation {invocation_id!r}")


class SubagentsListCommand:
    def __init__(self, api: SubagentsApi) -> None:
        self._api = api

    async def __call__(self, request: SubagentsList, exchange: Exchange) -> Reply[SubagentsReply]:
        loaded = [
            SubagentSummary(
                id=agent_id,
                description=revision.bundle.manifest.description,
                digest=revision.bundle.digest,
                effects=revision.bundle.manifest.effects,
                allowedCallers=list(revision.bundle.manifest.policy.allowedCallers),
                maxConcurrency=revision.bundle.manifest.policy.maxConcurrency,
            )
            for agent_id, revision in sorted(self._api.current().items())
        ]
        refused = [RefusedBundle(str(p.path), list(p.problems)) for p in self._api.problems()]
        return Reply(ok=True, data=SubagentsReply(SCHEMA_VERSION, loaded, refused))


class SubagentShowCommand:
    def __init__(self, api: SubagentsApi) -> None:
        self._api = api

    async def __call__(self, request: SubagentShow, exchange: Exchange) -> Reply[SubagentDetail]:
        revision = self._api.current().get(request.agent_id)
        if revision is None:
            return _not_found(request.agent_id)
        bundle = revision.bundle
        manifest = bundle.manifest
        detail = SubagentDetail(
            schema_version=SCHEMA_VERSION,
            id=manifest.id,
            description=manifest.description,
            model_provider=manifest.model_provider,
            mode=manifest.mode,
            digest=bundle.digest,
            snapshot=str(revision.snapshot),
            identity=revision.identity,
            policy=manifest.policy,
            effects=manifest.effects,
            retry_on_restart=manifest.retry_on_restart,
            mcp=list(manifest.mcp),
            skills=sorted(bundle.skills),  # names only: a skill's text stays in the daemon
            input_schema=bundle.input_schema,
            output_schema=bundle.output_schema,
        )
        return Reply(ok=True, data=detail)


class SubagentRevisionsCommand:
    def __init__(self, api: SubagentsApi) -> None:
        self._api = api

    async def __call__(
        self, request: SubagentRevisions, exchange: Exchange
    ) -> Reply[RevisionsReply]:
        current = self._api.current().get(request.agent_id)
        records = await self._api.revisions(request.agent_id)
        if not records and current is None:
            return _not_found(request.agent_id)
        digest = current.bundle.digest if current is not None else None
        revisions = [
            RevisionInfo(
                r.agent_id, r.digest, r.snapshot, r.first_seen, r.description, r.digest == digest
            )
            for r in records
        ]
        return Reply(ok=True, data=RevisionsReply(SCHEMA_VERSION, request.agent_id, revisions))


class DispatchCommand:
    """An operator's dispatch: caller `cli`, source `cli`; answers once the invocation ended."""

    def __init__(self, api: SubagentsApi) -> None:
        self._api = api

    async def __call__(self, request: Dispatch, exchange: Exchange) -> Reply[DispatchReply]:
        outcome = await self._api.dispatch(
            DispatchRequest(
                agent_id=request.agent_id,
                caller=CLI_CALLER,
                input=request.input,
                source=CLI_SOURCE,
                idempotency_key=request.idempotency_key,
            ),
            request.task,
        )
        if isinstance(outcome, Refused):
            refusal = DispatchRefusal(outcome.code, outcome.detail, outcome.pointer)
            return Reply(
                ok=False,
                data=DispatchReply(SCHEMA_VERSION, refusal=refusal),
                error=outcome.code,
                message=outcome.detail,
            )
        return Reply(ok=True, data=DispatchReply(SCHEMA_VERSION, invocation=outcome))


class InvocationsListCommand:
    def __init__(self, api: SubagentsApi) -> None:
        self._api = api

    async def __call__(
        self, request: InvocationsList, exchange: Exchange
    ) -> Reply[InvocationsReply]:
        if not 1 <= request.limit <= MAX_LIST_LIMIT:
            return error_reply("bad_request", f"limit must be 1..{MAX_LIST_LIMIT}")
        found = await self._api.invocations(
            state=request.state, agent_id=request.agent_id, limit=request.limit
        )
        infos = [listed(i) for i in found]
        return Reply(ok=True, data=InvocationsReply(SCHEMA_VERSION, infos))


class InvocationShowCommand:
    def __init__(self, api: SubagentsApi) -> None:
        self._api = api

    async def __call__(self, request: InvocationShow, exchange: Exchange) -> Reply[InvocationReply]:
        found = await self._api.invocation(request.invocation_id)
        if found is None:
            return _no_invocation(request.invocation_id)
        return Reply(ok=True, data=InvocationReply(SCHEMA_VERSION, found))


class InvocationCancelCommand:
    def __init__(self, api: SubagentsApi) -> None:
        self._api = api

    async def __call__(
        self, request: InvocationCancel, exchange: Exchange
    ) -> Reply[InvocationReply]:
        found = await self._api.cancel(request.invocation_id)
        if found is None:
            return _no_invocation(request.invocation_id)
        return Reply(ok=True, data=InvocationReply(SCHEMA_VERSION, found))


class InvocationEventsCommand:
    """The timeline; with `follow`, then every event as it is persisted until the
    invocation's terminal state, each batch its own reply (`more=True`), as chat streams."""

    def __init__(self, api: SubagentsApi) -> None:
        self._api = api

    def _reply(
        self, invocation_id: str, events: list[InvocationEvent], state: InvocationState
    ) -> InvocationEventsReply:
        return InvocationEventsReply(SCHEMA_VERSION, invocation_id, events, state)

    async def __call__(
        self, request: InvocationEvents, exchange: Exchange
    ) -> Reply[InvocationEventsReply]:
        invocation_id = request.invocation_id
        if not request.follow:
            found = await self._api.invocation(invocation_id)
            timeline = await self._api.timeline(invocation_id)
            if found is None or timeline is None:
                return _no_invocation(invocation_id)
            return Reply(ok=True, data=self._reply(invocation_id, timeline, found.state))
        if await self._api.invocation(invocation_id) is None:
            return _no_invocation(invocation_id)
        # Subscribe before reading the timeline, so no event falls between the two; what
        # both deliver is sent once (by attempt and sequence number).
        async with self._api.follow(invocation_id) as live:
            found = await self._api.invocation(invocation_id)
            timeline = await self._api.timeline(invocation_id)
            if found is None or timeline is None:
                return _no_invocation(invocation_id)
            if found.state in TERMINAL_STATES:
                return Reply(ok=True, data=self._reply(invocation_id, timeline, found.state))
            seen = {(e.invocation_id, e.seq) for e in timeline}
            await exchange.send(
                Reply(ok=True, data=self._reply(invocation_id, timeline, found.state), more=True)
            )
            state: InvocationState = found.state
            async for event in live:
                if (event.invocation_id, event.seq) in seen:
                    continue
                seen.add((event.invocation_id, event.seq))
                if event.invocation_id == invocation_id and isinstance(event.body, StateEntered):
                    state = event.body.state
                await exchange.send(
                    Reply(ok=True, data=self._reply(invocation_id, [event], state), more=True)
                )
        final = await self._api.invocation(invocation_id)
        end = final.state if final is not None else state
        return Reply(ok=True, data=self._reply(invocation_id, [], end))


def subagent_handlers(api: SubagentsApi) -> list[HandlerEntry]:
    """Every sub-agent control command with its handler (control.SUBAGENT_REQUEST_TYPES)."""
    return [
        (SubagentsList, SubagentsListCommand(api)),
        (SubagentShow, SubagentShowCommand(api)),
        (SubagentRevisions, SubagentRevisionsCommand(api)),
        (Dispatch, DispatchCommand(api)),
        (InvocationsList, InvocationsListCommand(api)),
        (InvocationShow, InvocationShowCommand(api)),
        (InvocationEvents, InvocationEventsCommand(api)),
        (InvocationCancel, InvocationCancelCommand(api)),
    ]


def register_subagent_commands(table: CommandTable, api: SubagentsApi) -> CommandTable:
    """Put every sub-agent control command in `table` (the daemon's one line)."""
    for request_type, handler in subagent_handlers(api):
        table.register(request_type, handler)
    return table
