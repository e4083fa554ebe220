"""The daemon's chat service: only the addressed agent speaks into a chat turn."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import trio
import zmq

from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.bus import Request, Router
from zeroclaw.config import validate_document
from zeroclaw.supervisor._chat import MAX_BUFFERED_EVENTS, ChatService, _Turn, cli_channel


def service(root: Path) -> tuple[ChatService, zmq.Context[zmq.Socket[bytes]]]:
    doc = make_config(root, {"alpha": agent_entry(), "beta": agent_entry()})
    config = validate_document(doc)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    return ChatService(Router(config, root, ctx)), ctx


def event(turn: str, body: Any) -> Request:
    return Request(id="r1", service="chat", op="event", body={"turn": turn, "event": body})


async def test_events_count_only_from_the_agent_the_turn_went_to(tmp_path: Path) -> None:
    chat, ctx = service(tmp_path)
    try:
        send, receive = trio.open_memory_channel[dict[str, Any]](math.inf)
        chat.turns["t1"] = _Turn("alpha", send)
        chat.on_request("beta", event("t1", {"event": "delta", "text": "spoofed"}))
        chat.on_request("beta", event("t1", {"event": "done", "reply": "spoofed"}))
        chat.on_request("alpha", event("t1", {"event": "exec", "cmd": "x"}))  # unknown kind
        chat.on_request("alpha", event("t1", "not a dict"))
        chat.on_request("alpha", event("nope", {"event": "delta", "text": "no such turn"}))
        chat.on_request("alpha", event("t1", {"event": "delta", "text": "real"}))
        assert receive.receive_nowait() == {"event": "delta", "text": "real"}
        assert receive.statistics().current_buffer_used == 0
        assert chat.spoofed == 2
    finally:
        ctx.term()


def test_the_cli_channel_is_the_agents_own_binding() -> None:
    assert cli_channel(("webhook.ops", "cli.local")) == "cli.local"
    assert cli_channel(("cli",)) == "cli"
    assert cli_channel(("webhook.ops",)) == "cli"
    assert cli_channel(()) == "cli"


async def test_a_turn_that_outruns_its_client_is_cut_off(tmp_path: Path) -> None:
    chat, ctx = service(tmp_path)
    try:
        send, receive = trio.open_memory_channel[dict[str, Any]](math.inf)
        chat.turns["t1"] = _Turn("alpha", send)
        for i in range(MAX_BUFFERED_EVENTS + 50):
            chat.on_request("alpha", event("t1", {"event": "delta", "text": f"{i}"}))
        chat.on_request("alpha", event("t1", {"event": "done", "reply": "late"}))
        assert receive.statistics().current_buffer_used == MAX_BUFFERED_EVENTS + 1
        events = [receive.receive_nowait() for _ in range(MAX_BUFFERED_EVENTS + 1)]
        assert events[-1] == {"event": "overflow"}
        assert events[-2] == {"event": "delta", "text": str(MAX_BUFFERED_EVENTS - 1)}
    finally:
        ctx.term()
