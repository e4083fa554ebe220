"""The sub-agent control commands translate requests into `SubagentsApi` calls and records
into typed replies, and nothing more: the caller of an operator's dispatch is always `cli`,
refusals keep their codes, no prompt or skill text crosses the socket, `--follow` streams.

The API here is a small in-test implementation over real bundles (load_bundle on files in
tmp_path), real admission (`admit`) and real records; the daemon's own implementation is
exercised end to end in tests/cli/test_subagents_cli.py.
"""

from __future__ import annotations

import itertools
import math
import shutil
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest
import trio

from zeroclaw._decode import DecodeFailure
from zeroclaw.control import (
    SUBAGENT_REQUEST_TYPES,
    AnyRequest,
    CommandTable,
    Dispatch,
    DispatchReply,
    Exchange,
    InvocationCancel,
    InvocationEvents,
    InvocationEventsReply,
    InvocationReply,
    InvocationShow,
    InvocationsList,
    Reply,
    Request,
    SubagentRevisions,
    SubagentShow,
    SubagentsList,
    decode_reply,
    decode_request,
    encode,
)
from zeroclaw.subagents import (
    SCHEMA_VERSION,
    Bundle,
    BundleProblems,
    DispatchRequest,
    Existing,
    Refused,
    admit,
    load_bundle,
    register_subagent_commands,
    subagent_handlers,
)
from zeroclaw.subagents._api import LoadedRevision, SubagentsApi
from zeroclaw.turns import (
    TERMINAL_STATES,
    Invocation,
    InvocationEvent,
    InvocationState,
    RevisionRecord,
    StateEntered,
    TextDelta,
    ToolCalled,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "etc" / "subagents"
PROVIDERS = frozenset({"offline.default"})
SECRET_PROMPT = "PROMPT-TEXT-NEVER-SHOWN"
SECRET_SKILL = "SKILL-BODY-NEVER-SHOWN"


# --- bundles on disk ------------------------------------------------------------------------


def write_bundle(root: Path, agent_id: str, callers: Sequence[str], input_schema: bool) -> Path:
    path = root / agent_id
    (path / "skills" / "method").mkdir(parents=True)
    (path / "schemas").mkdir()
    (path / "SYSTEM.md").write_text(f"You are {agent_id}. {SECRET_PROMPT}\n")
    (path / "skills" / "method" / "SKILL.md").write_text(
        f"---\nname: method\ndescription: how\n---\n{SECRET_SKILL}\n"
    )
    (path / "schemas" / "output.json").write_text(
        '{"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}'
    )
    lines = [
        f"id: {agent_id}",
        f"description: the {agent_id} sub-agent",
        "model_provider: offline.default",
        "skills: [./skills/method]",
        "outputSchema: ./schemas/output.json",
        f"policy: {{allowedCallers: [{', '.join(callers)}], maxConcurrency: 2}}",
        "effects: read_only",
        "retry_on_restart: true",
        "mcp: [{server: files, tools: [read]}]",
    ]
    if input_schema:
        (path / "schemas" / "input.json").write_text(
            '{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}'
        )
        lines.append("inputSchema: ./schemas/input.json")
    (path / "agent.yaml").write_text("\n".join(lines) + "\n")
    return path


def loaded(path: Path) -> Bundle:
    bundle = load_bundle(path, providers=PROVIDERS)
    assert isinstance(bundle, Bundle), bundle
    return bundle


# --- a small SubagentsApi over those bundles ---------------------------------------------------


@dataclass
class Api:
    """Admission is the real `admit`; a dispatch "runs" by recording a fixed timeline
    (`failed` for the task "fail", else `succeeded` with the task as its summary)."""

    bundles: dict[str, Bundle]
    snapshots: Path
    refused: list[BundleProblems] = field(default_factory=list)
    records: dict[str, list[RevisionRecord]] = field(default_factory=dict)
    stored: dict[str, Invocation] = field(default_factory=dict)
    events: dict[str, list[InvocationEvent]] = field(default_factory=dict)
    by_key: dict[tuple[str, str | None, str], str] = field(default_factory=dict)
    dispatched: list[tuple[DispatchRequest, str]] = field(default_factory=list)
    followers: dict[str, trio.MemorySendChannel[InvocationEvent]] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    ids: Any = field(default_factory=lambda: itertools.count(1))

    def current(self) -> Mapping[str, LoadedRevision]:
        return {
            agent_id: LoadedRevision(
                b, self.snapshots / b.digest, f"sub:{agent_id}@{b.digest[:12]}"
            )
            for agent_id, b in self.bundles.items()
        }

    def problems(self) -> Sequence[BundleProblems]:
        return self.refused

    async def revisions(self, agent_id: str) -> list[RevisionRecord]:
        return self.records.get(agent_id, [])

    async def dispatch(self, request: DispatchRequest, task: str) -> Invocation | Refused:
        self.dispatched.append((request, task))
        decision = admit(request, bundles=self.bundles, invocations_by_key=self.by_key, running={})
        if isinstance(decision, Refused):
            return decision
        if isinstance(decision, Existing):
            return self.stored[decision.invocation_id]
        failed = task == "fail"  # how a test asks for an invocation that does not succeed
        inv = self.add(
            request.agent_id,
            "failed" if failed else "succeeded",
            caller=request.caller,
            source=request.source,
            task=task,
            input=request.input,
            idempotency_key=request.idempotency_key,
            output=None if failed else {"summary": task[:20]},
            error_code="subagent_output_invalid" if failed else None,
            error_detail="42 is not of type 'string'" if failed else "",
            error_pointer="/summary" if failed else None,
        )
        if request.key is not None:
            self.by_key[request.key] = inv.id
        return inv

    def add(self, agent_id: str, state: InvocationState, **fields: Any) -> Invocation:
        inv_id = f"inv-{next(self.ids)}"
        defaults: dict[str, Any] = {
            "caller": "alpha",
            "source": "agent:alpha",
            "task": "t",
            "created_at": 1.0,
            "updated_at": 2.0,
        }
        inv = Invocation(
            id=inv_id,
            agent_id=agent_id,
            digest=self.bundles[agent_id].digest,
            state=state,
            **{**defaults, **fields},
        )
        self.stored[inv_id] = inv
        bodies: list[Any] = [StateEntered("accepted"), StateEntered("running")]
        if state in TERMINAL_STATES:
            bodies += [TextDelta("done"), StateEntered(state)]
        self.events[inv_id] = [
            InvocationEvent(inv_id, seq, float(seq), body) for seq, body in enumerate(bodies, 1)
        ]
        return inv

    async def invocations(
        self, *, state: InvocationState | None, agent_id: str | None, limit: int
    ) -> list[Invocation]:
        self.calls.append(("invocations", (state, agent_id, limit)))
        found = [
            i
            for i in reversed(self.stored.values())
            if (state is None or i.state == state) and (agent_id is None or i.agent_id == agent_id)
        ]
        return found[:limit]

    async def invocation(self, invocation_id: str) -> Invocation | None:
        return self.stored.get(invocation_id)

    async def timeline(
        self, invocation_id: str, after_seq: int = 0
    ) -> list[InvocationEvent] | None:
        events = self.events.get(invocation_id)
        if events is None:
            return None
        inv = self.stored[invocation_id]
        earlier = self.events.get(inv.retry_of, []) if inv.retry_of else []
        return [*earlier, *(e for e in events if e.seq > after_seq)]

    @asynccontextmanager
    async def follow(
        self, invocation_id: str
    ) -> AsyncIterator[trio.MemoryReceiveChannel[InvocationEvent]]:
        send, receive = trio.open_memory_channel[InvocationEvent](math.inf)
        self.followers[invocation_id] = send
        async with receive:
            yield receive

    async def persist(self, event: InvocationEvent) -> None:
        """What the daemon does with a runtime event: store it, tell the followers, and
        close their channels at a terminal state."""
        self.events[event.invocation_id].append(event)
        inv = self.stored[event.invocation_id]
        if isinstance(event.body, StateEntered):
            inv = self.stored[inv.id] = msgspec.structs.replace(inv, state=event.body.state)
        follower = self.followers.get(inv.id)
        if follower is not None:
            await follower.send(event)
            if inv.state in TERMINAL_STATES:
                await follower.aclose()

    async def cancel(self, invocation_id: str) -> Invocation | None:
        inv = self.stored.get(invocation_id)
        if inv is None or inv.state in TERMINAL_STATES:
            return inv
        inv = self.stored[invocation_id] = msgspec.structs.replace(
            inv, state="cancelled", error_code="subagent_cancelled"
        )
        return inv


def _is_api(api: Api) -> SubagentsApi:
    return api  # mypy checks the in-test API against the Protocol the daemon implements


def make_api(tmp_path: Path) -> Api:
    """open-one (cli allowed, input schema), private (alpha only), summarizer (a copy of
    the example), and one refused bundle (its provider is unknown)."""
    bundles = tmp_path / "subagents"
    open_one = loaded(write_bundle(bundles, "open-one", ["alpha", "cli"], input_schema=True))
    private = loaded(write_bundle(bundles, "private", ["alpha"], input_schema=False))
    summarizer = tmp_path / "copied" / "summarizer"
    shutil.copytree(EXAMPLES / "summarizer", summarizer)
    refused = load_bundle(write_bundle(bundles, "broken", ["cli"], False), providers=frozenset())
    assert isinstance(refused, BundleProblems)
    result = Api(
        {"open-one": open_one, "private": private, "summarizer": loaded(summarizer)},
        tmp_path / "revisions",
        refused=[refused],
    )
    result.records["open-one"] = [
        RevisionRecord(agent_id="open-one", digest="0" * 64, snapshot="/old", first_seen=1.0),
        RevisionRecord(
            agent_id="open-one", digest=open_one.digest, snapshot="/new", first_seen=2.0
        ),
    ]
    return result


@pytest.fixture
def api(tmp_path: Path) -> Api:
    return make_api(tmp_path)


class Client:
    """The control server's side of one connection: what the handler streamed."""

    def __init__(self) -> None:
        self.streamed: list[Reply[Any]] = []
        self.sent = trio.Event()
        _send, receive = trio.open_memory_channel[AnyRequest](0)

        async def send(reply: Reply[Any]) -> None:
            self.streamed.append(reply)
            self.sent.set()

        self.exchange = Exchange(send, receive)


async def ask(api: Api, request: Request[Any], client: Client | None = None) -> Reply[Any]:
    """Run `request` through a command table built as the daemon builds it, and send the
    final reply over the wire codec, decoded as the request's reply type."""
    table = register_subagent_commands(CommandTable(), api)
    assert isinstance(request, get_args(AnyRequest))
    reply = await table.dispatch(request, (client or Client()).exchange)  # type: ignore[arg-type]
    return decode_reply(encode(reply), request.reply_type)


# --- the table --------------------------------------------------------------------------------


def test_every_subagent_request_has_a_handler(api: Api) -> None:
    table = CommandTable()
    for request_type, handler in subagent_handlers(api):
        table.register(request_type, handler)
    assert table.require(SUBAGENT_REQUEST_TYPES) is table
    assert {t for t, _ in subagent_handlers(api)} == set(SUBAGENT_REQUEST_TYPES)


def test_the_replies_carry_the_records_themselves_with_every_field() -> None:
    """One definition (issue 25): a reply decodes into the daemon's own record structs, and
    its JSON names every field, defaults included (what `--json` prints)."""
    record = Invocation(
        id="i1", agent_id="a", digest="d", caller="cli", source="cli", task="t",
        created_at=1.0, updated_at=1.0,
    )  # fmt: skip
    wire = msgspec.json.encode(InvocationReply(1, record))
    assert msgspec.json.decode(wire, type=InvocationReply).invocation == record
    assert set(msgspec.json.decode(wire)["invocation"]) == set(Invocation.__struct_fields__)
    event = InvocationEvent("i1", 1, 1.0, StateEntered("accepted"))
    body = msgspec.json.decode(msgspec.json.encode(event))["body"]
    assert body == {"kind": "state", "state": "accepted", "error_code": None, "detail": ""}


# --- subagents list | show | revisions ------------------------------------------------------


async def test_list_shows_each_loaded_sub_agent_and_each_refused_bundle(api: Api) -> None:
    reply = await ask(api, SubagentsList())
    assert reply.ok and reply.data is not None
    data = reply.data
    assert data.schema_version == SCHEMA_VERSION
    assert [s.id for s in data.subagents] == ["open-one", "private", "summarizer"]
    first = data.subagents[0]
    assert first.digest == api.bundles["open-one"].digest
    assert (first.effects, first.allowedCallers, first.maxConcurrency) == (
        "read_only",
        ["alpha", "cli"],
        2,
    )
    assert [r.path for r in data.refused] == [str(api.refused[0].path)]
    assert any("model_provider" in p for p in data.refused[0].problems)


async def test_show_gives_the_manifest_and_runtime_but_never_prompt_or_skill_text(
    api: Api,
) -> None:
    table = register_subagent_commands(CommandTable(), api)
    raw = await table.dispatch(SubagentShow(agent_id="open-one"), Client().exchange)
    wire = encode(raw)
    assert SECRET_PROMPT.encode() not in wire and SECRET_SKILL.encode() not in wire
    d = decode_reply(wire, SubagentShow.reply_type).data
    assert d is not None
    bundle = api.bundles["open-one"]
    assert (d.schema_version, d.id, d.digest) == (SCHEMA_VERSION, "open-one", bundle.digest)
    assert d.identity == f"sub:open-one@{bundle.digest[:12]}"
    assert d.snapshot == str(api.snapshots / bundle.digest)
    assert d.skills == ["method"]
    assert [(m.server, m.tools) for m in d.mcp] == [("files", ("read",))]
    assert d.policy.allowedCallers == ("alpha", "cli") and d.policy.maxConcurrency == 2
    assert (d.effects, d.retry_on_restart) == ("read_only", True)
    assert d.input_schema == bundle.input_schema and d.output_schema == bundle.output_schema


async def test_show_and_revisions_of_an_unknown_id_are_subagent_not_found(api: Api) -> None:
    for request in (SubagentShow(agent_id="nope"), SubagentRevisions(agent_id="nope")):
        reply = await ask(api, request)
        assert (reply.ok, reply.error) == (False, "subagent_not_found")
        assert "nope" in (reply.message or "")


async def test_revisions_are_oldest_first_with_the_current_one_marked(api: Api) -> None:
    reply = await ask(api, SubagentRevisions(agent_id="open-one"))
    assert reply.data is not None and reply.data.schema_version == SCHEMA_VERSION
    revisions = reply.data.revisions
    assert [r.first_seen for r in revisions] == [1.0, 2.0]
    assert [r.current for r in revisions] == [False, True]


# --- dispatch -------------------------------------------------------------------------------


async def test_an_operator_dispatch_is_made_as_cli_from_source_cli(api: Api) -> None:
    request = Dispatch(agent_id="open-one", task="sum it", input={"text": "x"}, idempotency_key="k")
    reply = await ask(api, request)
    assert reply.ok and reply.error is None
    data: DispatchReply = reply.data
    assert data.schema_version == SCHEMA_VERSION and data.refusal is None
    assert data.invocation is not None
    assert (data.invocation.state, data.invocation.output) == ("succeeded", {"summary": "sum it"})
    ((sent, task),) = api.dispatched
    assert (sent.caller, sent.source, sent.parent_run_id) == ("cli", "cli", None)
    assert (sent.agent_id, sent.input, sent.idempotency_key, task) == (
        "open-one",
        {"text": "x"},
        "k",
        "sum it",
    )
    again = await ask(api, request)
    assert again.data.invocation.id == data.invocation.id


def test_a_dispatch_naming_its_own_caller_is_not_a_request() -> None:
    """The wire has no caller field: a forged one makes the frame malformed."""
    forged = msgspec.msgpack.encode(
        {"cmd": "dispatch", "agent_id": "private", "task": "t", "caller": "alpha"}
    )
    with pytest.raises(DecodeFailure) as caught:
        decode_request(forged)
    assert caught.value.code == "malformed"
    assert decode_request(msgspec.msgpack.encode({"cmd": "dispatch", "agent_id": "a", "task": "t"}))


@pytest.mark.parametrize(
    ("request_", "code", "pointer"),
    [
        (Dispatch(agent_id="nope", task="t"), "subagent_not_found", None),
        (Dispatch(agent_id="private", task="t"), "subagent_caller_not_allowed", None),
        (
            Dispatch(agent_id="open-one", task="t", input={"text": 42}),
            "subagent_input_invalid",
            "/text",
        ),
    ],
)
async def test_a_refused_dispatch_answers_its_refusal_code(
    api: Api, request_: Dispatch, code: str, pointer: str | None
) -> None:
    reply = await ask(api, request_)
    assert (reply.ok, reply.error) == (False, code)
    assert reply.data is not None and reply.data.invocation is None
    refusal = reply.data.refusal
    assert (refusal.code, refusal.pointer) == (code, pointer)
    assert refusal.detail and reply.message == refusal.detail
    assert not api.stored


# --- invocations list | show | cancel -------------------------------------------------------


async def test_invocations_list_passes_its_filters_and_shows_every_field(api: Api) -> None:
    api.add("private", "failed", error_code="subagent_output_invalid", error_pointer="/summary")
    api.add("open-one", "succeeded", output={"summary": "s"})
    reply = await ask(api, InvocationsList(state="failed", agent_id="private", limit=5))
    assert api.calls == [("invocations", ("failed", "private", 5))]
    assert reply.data.schema_version == SCHEMA_VERSION
    (only,) = reply.data.invocations
    assert (only.agent_id, only.error_code, only.error_pointer) == (
        "private",
        "subagent_output_invalid",
        "/summary",
    )
    every = await ask(api, InvocationsList())
    assert [i.agent_id for i in every.data.invocations] == ["open-one", "private"]
    bad = await ask(api, InvocationsList(limit=0))
    assert (bad.ok, bad.error) == (False, "bad_request")


async def test_show_and_cancel_of_an_unknown_invocation_are_invocation_not_found(
    api: Api,
) -> None:
    for request in (InvocationShow(invocation_id="x"), InvocationCancel(invocation_id="x")):
        reply = await ask(api, request)
        assert (reply.ok, reply.error) == (False, "invocation_not_found")
    events = await ask(api, InvocationEvents(invocation_id="x", follow=True))
    assert events.error == "invocation_not_found"


async def test_cancel_of_a_finished_invocation_answers_it_unchanged(api: Api) -> None:
    done = api.add("open-one", "succeeded")
    reply = await ask(api, InvocationCancel(invocation_id=done.id))
    assert reply.ok and reply.data.invocation.state == "succeeded"
    running = api.add("open-one", "running")
    cancelled = await ask(api, InvocationCancel(invocation_id=running.id))
    assert cancelled.data.invocation.state == "cancelled"
    shown = await ask(api, InvocationShow(invocation_id=running.id))
    assert shown.data.invocation.error_code == "subagent_cancelled"


# --- events ---------------------------------------------------------------------------------


async def test_events_replay_every_attempt_in_order(api: Api) -> None:
    first = api.add("open-one", "interrupted")
    second = api.add("open-one", "succeeded", retry_of=first.id, attempt=2)
    reply = await ask(api, InvocationEvents(invocation_id=second.id))
    data: InvocationEventsReply = reply.data
    assert not reply.more and data.state == "succeeded"
    assert [(e.invocation_id, e.seq) for e in data.events] == [
        *((first.id, n) for n in range(1, 5)),
        *((second.id, n) for n in range(1, 5)),
    ]
    assert data.events[2].body == TextDelta("done")


async def test_following_a_finished_invocation_is_its_timeline_in_one_reply(api: Api) -> None:
    done = api.add("open-one", "failed")
    client = Client()
    reply = await ask(api, InvocationEvents(invocation_id=done.id, follow=True), client)
    assert not client.streamed and not reply.more
    assert len(reply.data.events) == 4 and reply.data.state == "failed"


async def test_following_streams_each_event_once_until_the_terminal_state(api: Api) -> None:
    running = api.add("open-one", "running")
    client = Client()
    final: list[Reply[Any]] = []
    request = InvocationEvents(invocation_id=running.id, follow=True)

    async def follow() -> None:
        final.append(await ask(api, request, client))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow)
        await client.sent.wait()  # the timeline so far: subscribed by now
        client.sent = trio.Event()
        await api.persist(InvocationEvent(running.id, 3, 3.0, TextDelta("hel")))
        await client.sent.wait()
        await api.persist(
            InvocationEvent(running.id, 4, 4.0, ToolCalled("read", {"p": "x"}, ok=True))
        )
        # Delivered twice (a subscription racing the timeline): shown once.
        await api.persist(InvocationEvent(running.id, 4, 4.0, ToolCalled("read", {}, ok=True)))
        await api.persist(InvocationEvent(running.id, 5, 5.0, StateEntered("succeeded")))
    streamed = [decode_reply(encode(r), InvocationEvents.reply_type) for r in client.streamed]
    assert all(r.ok and r.more for r in streamed)
    seqs = [e.seq for r in streamed for e in r.data.events]
    assert seqs == [1, 2, 3, 4, 5]
    assert [r.data.state for r in streamed] == ["running", "running", "running", "succeeded"]
    (last,) = final
    assert last.ok and not last.more
    assert last.data.events == [] and last.data.state == "succeeded"
