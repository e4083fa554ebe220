"""Messages on the control socket (operator CLI ⇄ daemon), as msgspec structs in msgpack.

Requests are a tagged union on `cmd`; every request gets one or more Replies (`more=True`
on all but the last, for streaming commands such as chat). Each request class names the
type its replies carry in `data` (`reply_type`), so the daemon's handler returns that type
and the client decodes it (`ControlClient.call`) instead of indexing a dict (ADR 0017).
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Literal, TypeGuard, get_args

import msgspec
from typing_extensions import TypeVar

from .._decode import DecodeErrorCode, decode_msgpack
from .._refusals import RefusalCode
from ..turns import DispatchRefusalCode, InvocationState, MemoryErrorCode
from ._replies import (
    AgentsReply,
    AgentStatus,
    ApprovalDecision,
    ApprovalsReply,
    ChatOpened,
    DispatchReply,
    EventsReply,
    InvocationEventsReply,
    InvocationReply,
    InvocationsReply,
    McpListReply,
    McpServerDetail,
    McpToolsReply,
    McpTrustReply,
    MetricsReply,
    ProbeReply,
    ReloadReply,
    RevisionsReply,
    SessionReply,
    SessionsReply,
    ShutdownReply,
    StatusReply,
    SubagentDetail,
    SubagentsReply,
    UsageReply,
)

PROTOCOL_VERSION = 1
MAX_CONTROL_FRAME = 4 * 1024 * 1024

# The control socket's own codes and those only its commands give.
ControlOwnErrorCode = Literal[
    "bad_request",
    "unsupported",
    "internal",
    "busy",
    "forbidden",
    "fatal",
    "reload_failed",
    "cancelled",
    # sub-agents: an invocation id the daemon does not know
    "invocation_not_found",
    # `events --follow`: a reader that did not keep up was cut off
    "slow_reader",
    # `approvals approve|deny`: no pending approval of that id (answered, expired, never)
    "unknown_approval",
    # `mcp show|trust`: a server the config does not name
    "unknown_mcp_server",
    # `mcp trust`: no pinned tool matched the server, tool and agent given
    "nothing_to_trust",
    # `mcp trust`: the daemon's MCP pin store is unreadable (the message says the fix)
    "mcp_pins_corrupt",
    # `mcp trust --digest`: the server listed another schema since the one reviewed
    "digest_changed",
]
# Every stable code a control reply's `error` may carry. A code outside this set is a type
# error, not a surprise for scripts.
ControlErrorCode = Literal[
    ControlOwnErrorCode,
    RefusalCode,  # the router's, as a probe or a chat turn meets them
    MemoryErrorCode,  # the memory service's answers
    DecodeErrorCode,  # an undecodable frame
    DispatchRefusalCode,  # a dispatch the daemon refuses
]
CONTROL_ERROR_CODES: frozenset[str] = frozenset(get_args(ControlErrorCode))


def is_control_code(code: str) -> TypeGuard[ControlErrorCode]:
    return code in CONTROL_ERROR_CODES


def control_code(code: str) -> ControlErrorCode:
    """A code from another component (a probe's outcome, a memory error) as a control code;
    one this protocol does not know is an internal error, never passed on unchecked."""
    return code if is_control_code(code) else "internal"


# Defaults to Any: a bare `Reply` is one whose data is plain msgpack values.
R = TypeVar("R", default=Any)


class Request(msgspec.Struct, Generic[R], tag_field="cmd", forbid_unknown_fields=True, frozen=True):
    """A request whose replies carry `R` in `data` (`reply_type` names it at run time)."""

    reply_type: ClassVar[Any] = Any


class Status(Request[StatusReply], tag="status", frozen=True):
    reply_type = StatusReply


class AgentsList(Request[AgentsReply], tag="agents.list", frozen=True):
    reply_type = AgentsReply


class AgentStart(Request[AgentStatus], tag="agents.start", frozen=True):
    reply_type = AgentStatus
    alias: str


class AgentStop(Request[AgentStatus], tag="agents.stop", frozen=True):
    reply_type = AgentStatus
    alias: str


class AgentRestart(Request[AgentStatus], tag="agents.restart", frozen=True):
    reply_type = AgentStatus
    alias: str


class RouteProbe(Request[ProbeReply], tag="route.probe", frozen=True):
    """Make agent `from_` send a probe to `to` through the router."""

    reply_type = ProbeReply
    from_: str = msgspec.field(name="from")
    to: str
    channel: str | None = None


class MemoryCommand(Request[dict[str, object]], tag="memory", frozen=True):
    """An operator memory operation on one agent's namespace. Its result's type depends on
    `op`: the reply's data is that struct's fields (MEMORY_REPLY_TYPES[op] converts them),
    and `args` the operation's request struct's fields (the memory service decodes them)."""

    reply_type = dict[str, object]
    op: str
    agent: str
    args: dict[str, object] = msgspec.field(default_factory=dict)


class SessionsList(Request[SessionsReply], tag="sessions.list", frozen=True):
    """Every stored session of every origin (of one agent, or of all), by agent and key."""

    reply_type = SessionsReply
    agent: str | None = None


class SessionShow(Request[SessionReply], tag="sessions.show", frozen=True):
    """One session's last `limit` turns, oldest first."""

    reply_type = SessionReply
    agent: str
    session: str
    limit: int = 200


class Chat(Request[dict[str, object]], tag="chat", frozen=True):
    """One chat turn with an agent. Replies stream events (`more=True`, each a TurnEvent:
    {"event": "delta", "text"}, {"event": "tool", ...}, {"event": "approval", "what"}); the
    last reply carries the result (a ChatResult). Two types in one stream: the client
    converts each reply's fields. While it runs the client may send ChatCancel or
    ChatApproval."""

    reply_type = dict[str, object]
    agent: str
    text: str
    session: str = "default"
    interactive: bool = False  # someone is there to answer approval prompts


class ChatOpen(Request[ChatOpened], tag="chat.open", frozen=True):
    """Sent first by an interactive `zeroclaw chat`: the connection is a chat session from
    now on, which the daemon never closes for being idle (someone is thinking or typing)."""

    reply_type = ChatOpened
    agent: str


class ChatCancel(Request[None], tag="chat.cancel", frozen=True):
    reply_type = None


class ChatApproval(Request[None], tag="chat.approval", frozen=True):
    reply_type = None
    approved: bool


class EventsRecent(Request[EventsReply], tag="events.recent", frozen=True):
    """The newest `limit` events the daemon kept (all it kept when None), oldest first."""

    reply_type = EventsReply
    limit: int | None = None


class Reload(Request[ReloadReply], tag="reload", frozen=True):
    reply_type = ReloadReply


class Shutdown(Request[ShutdownReply], tag="shutdown", frozen=True):
    reply_type = ShutdownReply


class EventsFollow(Request[EventsReply], tag="events.follow", frozen=True):
    """Events about `agents` and of `kinds` (a tag, or its family before the dot; empty:
    all). First the newest `backlog` matching ones the daemon kept (all when None), then,
    with `follow`, each new one as it is published: every reply carries `more=True` until
    the client goes away. A client that does not keep up is cut off with `slow_reader`."""

    reply_type = EventsReply
    agents: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    backlog: int | None = None
    follow: bool = True


class Metrics(Request[MetricsReply], tag="metrics", frozen=True):
    """The daemon's metrics, in the Prometheus text format (`zeroclaw metrics`)."""

    reply_type = MetricsReply


# --- the operator's approval queue (`zeroclaw approvals`, ADR 0042) -----------------------


class UsageQuery(Request[UsageReply], tag="usage", frozen=True):
    """The usage ledger's rows from UTC day `since` (YYYY-MM-DD) on, of one agent or all."""

    reply_type = UsageReply
    since: str
    agent: str | None = None


class ApprovalsList(Request[ApprovalsReply], tag="approvals.list", frozen=True):
    """Approvals of outside origins waiting for the operator, oldest first."""

    reply_type = ApprovalsReply


class ApprovalApprove(Request[ApprovalDecision], tag="approvals.approve", frozen=True):
    reply_type = ApprovalDecision
    id: str


class ApprovalDeny(Request[ApprovalDecision], tag="approvals.deny", frozen=True):
    reply_type = ApprovalDecision
    id: str


# --- sub-agents (`zeroclaw subagents`, `dispatch`, `invocations`) -------------------------


class SubagentsList(Request[SubagentsReply], tag="subagents.list", frozen=True):
    """Every loaded sub-agent, and the bundles of the last scan that were refused."""

    reply_type = SubagentsReply


class SubagentShow(Request[SubagentDetail], tag="subagents.show", frozen=True):
    reply_type = SubagentDetail
    agent_id: str


class SubagentRevisions(Request[RevisionsReply], tag="subagents.revisions", frozen=True):
    reply_type = RevisionsReply
    agent_id: str


class Dispatch(Request[DispatchReply], tag="dispatch", frozen=True):
    """Hand a sub-agent a task and wait for the invocation's end. There is no caller field:
    the daemon's handler sets the caller (`cli`), whoever holds the socket is the operator."""

    reply_type = DispatchReply
    agent_id: str
    task: str
    input: object = None  # a JSON value, checked against the input schema
    idempotency_key: str | None = None


class InvocationsList(Request[InvocationsReply], tag="invocations.list", frozen=True):
    """Newest first."""

    reply_type = InvocationsReply
    state: InvocationState | None = None
    agent_id: str | None = None
    limit: int = 50


class InvocationShow(Request[InvocationReply], tag="invocations.show", frozen=True):
    reply_type = InvocationReply
    invocation_id: str


class InvocationEvents(Request[InvocationEventsReply], tag="invocations.events", frozen=True):
    """An invocation's timeline. With `follow`, replies stream (`more=True`) as events are
    persisted until its terminal state, the way a chat turn streams."""

    reply_type = InvocationEventsReply
    invocation_id: str
    follow: bool = False


class InvocationCancel(Request[InvocationReply], tag="invocations.cancel", frozen=True):
    """Cancel an accepted or running invocation; a finished one is answered as it is."""

    reply_type = InvocationReply
    invocation_id: str


# --- MCP servers and their pinned tools (`zeroclaw mcp`, issue 26) -----------------------


class McpList(Request[McpListReply], tag="mcp.list", frozen=True):
    """Every configured MCP server, the agents using it and their live state."""

    reply_type = McpListReply


class McpShow(Request[McpServerDetail], tag="mcp.show", frozen=True):
    reply_type = McpServerDetail
    server: str


class McpTools(Request[McpToolsReply], tag="mcp.tools", frozen=True):
    """Every pinned tool (of one agent, of one server), sorted by agent, server, tool."""

    reply_type = McpToolsReply
    agent: str | None = None
    server: str | None = None


class McpTrust(Request[McpTrustReply], tag="mcp.trust", frozen=True):
    """Trust the latest schema `server` listed (its `tool`, to `agent`; None: all); with
    `digest` (at least 12 hex digits of the one the operator reviewed), only that one."""

    reply_type = McpTrustReply
    server: str
    tool: str | None = None
    agent: str | None = None
    digest: str | None = None


CoreRequest = (
    Status
    | AgentsList
    | AgentStart
    | AgentStop
    | AgentRestart
    | RouteProbe
    | MemoryCommand
    | SessionsList
    | SessionShow
    | Chat
    | ChatOpen
    | ChatCancel
    | ChatApproval
    | EventsRecent
    | Reload
    | Shutdown
    | EventsFollow
    | Metrics
    | ApprovalsList
    | ApprovalApprove
    | ApprovalDeny
    | UsageQuery
)
SubagentRequest = (
    SubagentsList
    | SubagentShow
    | SubagentRevisions
    | Dispatch
    | InvocationsList
    | InvocationShow
    | InvocationEvents
    | InvocationCancel
)
McpRequest = McpList | McpShow | McpTools | McpTrust
AnyRequest = CoreRequest | SubagentRequest | McpRequest


def _members(union: object) -> tuple[type[Request[Any]], ...]:
    return get_args(union)


REQUEST_TYPES = _members(CoreRequest)
# Kept apart until the daemon registers the sub-agent commands: the daemon's table
# requires every one of REQUEST_TYPES, and these need its sub-agent service.
SUBAGENT_REQUEST_TYPES = _members(SubagentRequest)
# Likewise: they need the daemon's MCP pin service (zeroclaw.pins).
MCP_REQUEST_TYPES = _members(McpRequest)


class Reply(msgspec.Struct, Generic[R], frozen=True, omit_defaults=True):
    """The envelope of every answer on the wire; `data` is the request's `reply_type`."""

    ok: bool
    data: R | None = None
    error: ControlErrorCode | None = None  # a stable code, e.g. "unknown_agent"
    message: str | None = None  # for people
    more: bool = False


_request_encoder = msgspec.msgpack.Encoder()
_request_decoder = msgspec.msgpack.Decoder(AnyRequest)
_reply_decoders: dict[Any, msgspec.msgpack.Decoder[Any]] = {}


def encode(message: Request[Any] | Reply[Any]) -> bytes:
    return _request_encoder.encode(message)


def decode_request(payload: bytes) -> AnyRequest:
    """Raises DecodeFailure (code `malformed` or `too_large`) on anything else, however
    deep or broken (ADR 0014)."""
    return decode_msgpack(_request_decoder, payload, max_bytes=MAX_CONTROL_FRAME)


def decode_reply(payload: bytes, data_type: Any = Any) -> Reply[Any]:
    """Raises DecodeFailure as decode_request does. `data` is decoded as `data_type`
    (a request's `reply_type`), or left as plain msgpack values."""
    decoder = _reply_decoders.get(data_type)
    if decoder is None:
        decoder = _reply_decoders[data_type] = msgspec.msgpack.Decoder(Reply[data_type])
    return decode_msgpack(decoder, payload, max_bytes=MAX_CONTROL_FRAME)


def error_reply(code: ControlErrorCode, message: str) -> Reply[Any]:
    return Reply(ok=False, error=code, message=message)
