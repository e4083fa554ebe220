"""Typed requests and replies on the control socket, and the command table."""

from __future__ import annotations

from typing import Any, get_args

import msgspec
import pytest
import trio

from zeroclaw._decode import DECODE_ERROR_CODES
from zeroclaw.bus import REFUSAL_CODES
from zeroclaw.control import (
    CONTROL_ERROR_CODES,
    MCP_REQUEST_TYPES,
    REQUEST_TYPES,
    SCHEDULE_REQUEST_TYPES,
    SUBAGENT_REQUEST_TYPES,
    AgentsList,
    AgentsReply,
    AgentStatus,
    AnyRequest,
    CommandTable,
    ControlStats,
    DaemonStatus,
    Exchange,
    IncompleteCommandTable,
    ProbeReply,
    RefusedConnections,
    ReloadStatus,
    Reply,
    Request,
    RouterStats,
    Shutdown,
    ShutdownReply,
    Status,
    StatusReply,
    control_code,
    decode_reply,
    encode,
)


def agent_status(alias: str = "alpha", state: str = "running") -> AgentStatus:
    return AgentStatus(alias, state, 42, 0, None, None, 1.0, 2.0, "always", 0, None, "none")


ROUTER = RouterStats(
    "ipc:///bus", "key", [], 0, 0, 0, {"delivered": 0}, RefusedConnections(), {}, 0.0
)


def status_reply() -> StatusReply:
    daemon = DaemonStatus(
        1, "0", 1.0, 2.0, "/c", "/s", "/r", True, ReloadStatus("never", None, [], {})
    )
    return StatusReply(
        daemon, {"running": 1}, ROUTER, [agent_status()], ControlStats(0, 0, 0, 0, 0, 0)
    )


def test_every_request_names_its_reply_type() -> None:
    every = (*REQUEST_TYPES, *SUBAGENT_REQUEST_TYPES, *MCP_REQUEST_TYPES, *SCHEDULE_REQUEST_TYPES)
    assert set(every) == set(get_args(AnyRequest))
    for request_type in every:
        assert "reply_type" in vars(request_type), request_type.__name__


def test_a_reply_decodes_as_its_requests_reply_type() -> None:
    reply = Reply(ok=True, data=status_reply())
    decoded = decode_reply(encode(reply), Status.reply_type)
    assert decoded == reply and isinstance(decoded.data, StatusReply)
    # Without a type, the same bytes are plain values (what a streaming chat reads).
    plain = decode_reply(encode(reply))
    assert plain.data == msgspec.to_builtins(status_reply())


def test_an_error_reply_decodes_without_data_whatever_the_request() -> None:
    reply = Reply[ShutdownReply](ok=False, error="busy", message="full")
    assert decode_reply(encode(reply), ShutdownReply) == reply


def test_status_json_keeps_its_shape() -> None:
    shape = msgspec.to_builtins(status_reply())
    assert list(shape) == ["daemon", "counts", "router", "agents", "control"]
    assert list(shape["daemon"]["reload"]) == ["state", "at", "errors", "last_diff"]
    assert list(shape["agents"][0]) == [
        "alias",
        "state",
        "pid",
        "restarts",
        "last_exit",
        "last_error",
        "since",
        "since_secs",
        "activation",
        "busy_turns",
        "next_start_in",
        "sandbox",
        "sandbox_in_force",
        "without",
    ]


def test_an_agent_never_started_has_no_since_and_the_same_keys() -> None:
    """`since` is wall-clock time of the last change; an agent that never ran has none
    (not a time computed from trio's arbitrary clock origin), and the shape stays."""
    never = msgspec.structs.replace(agent_status(state="stopped"), since=None, since_secs=None)
    shape = msgspec.to_builtins(never)
    assert list(shape) == list(msgspec.to_builtins(agent_status()))
    assert (shape["since"], shape["since_secs"]) == (None, None)
    assert decode_reply(encode(Reply(ok=True, data=never)), AgentStatus).data == never


def test_probe_reply_omits_the_route_when_an_alias_is_unknown() -> None:
    assert msgspec.to_builtins(ProbeReply("unknown_agent")) == {"outcome": "unknown_agent"}
    delivered = ProbeReply("delivered", "a", "b", "cli.local", 0.5, "")
    assert msgspec.to_builtins(delivered)["from"] == "a"


def test_control_codes_cover_every_refusal_and_decode_code() -> None:
    assert set(REFUSAL_CODES) <= CONTROL_ERROR_CODES
    assert set(DECODE_ERROR_CODES) <= CONTROL_ERROR_CODES
    assert control_code("not_peers") == "not_peers"
    assert control_code("something new") == "internal"


def test_an_unknown_error_code_does_not_decode() -> None:
    wire = msgspec.msgpack.encode({"ok": False, "error": "made_up"})
    with pytest.raises(msgspec.ValidationError):
        msgspec.msgpack.decode(wire, type=Reply[Any])


class _Answer:
    def __init__(self, data: AgentsReply) -> None:
        self.data = data

    async def __call__(self, request: AgentsList, exchange: Exchange) -> Reply[AgentsReply]:
        return Reply(ok=True, data=self.data)


def _exchange() -> Exchange:
    async def send(reply: Reply[Any]) -> None:
        raise AssertionError("nothing streams here")

    _send, inbox = trio.open_memory_channel[AnyRequest](1)
    return Exchange(send, inbox)


async def test_the_table_dispatches_by_request_type() -> None:
    table = CommandTable()
    answer = AgentsReply([agent_status()])
    table.register(AgentsList, _Answer(answer))
    assert await table.dispatch(AgentsList(), _exchange()) == Reply(ok=True, data=answer)
    unsupported = await table.dispatch(Shutdown(), _exchange())
    assert unsupported.error == "unsupported" and "Shutdown" in (unsupported.message or "")


def test_a_table_without_a_handler_for_some_request_is_refused() -> None:
    table = CommandTable()
    table.register(AgentsList, _Answer(AgentsReply([])))
    with pytest.raises(IncompleteCommandTable, match="Status"):
        table.require(REQUEST_TYPES)
    assert "AgentsList" not in table.missing(REQUEST_TYPES)
    assert len(table.missing(REQUEST_TYPES)) == len(REQUEST_TYPES) - 1
    with pytest.raises(ValueError, match="already"):
        table.register(AgentsList, _Answer(AgentsReply([])))


def test_request_is_generic_in_its_reply() -> None:
    request: Request[StatusReply] = Status()
    assert request.reply_type is StatusReply
