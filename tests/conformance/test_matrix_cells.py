"""The Matrix channel's cells (ADR 0066), driven through the product's own decisions: the
channel's sans-IO core fed the sync responses a homeserver would send, and the host's
routing (`route_inbound`) over a real config's peer policy. The same paths against a real
Synapse: tests/channels/test_matrix_synapse.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.channels.test_matrix_core import member, sync, text
from tests.conformance._matrix import Cell, Observed, cells_on
from tests.conformance._table import record
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.bus import PeerPolicy
from zeroclaw.channels import Inbound, Routed, route_inbound
from zeroclaw.channels._matrix_core import Answer, Deliver, Join, Leave, MatrixCore, Notice
from zeroclaw.config import validate_document

CELLS = cells_on("matrix")
BOT, ALICE, OPS, STRANGER = "@zcbot:hs", "@alice:hs", "@ops:hs", "@stranger:hs"
ROOM, KEY = "!room:hs", "matrix.home"


def policy(tmp_path: Path) -> PeerPolicy:
    doc = make_config(tmp_path, {"alpha": agent_entry(channels=["cli.local", KEY])})
    doc["channels"]["matrix"] = {
        "home": {"homeserver": "https://hs", "user_id": BOT, "access_token_env": "T"}
    }
    doc["peer_groups"]["home"] = {
        "channel": KEY,
        "agents": ["alpha"],
        "external_peers": [ALICE, OPS],
        "approvals": "sender",
    }
    return PeerPolicy(validate_document(doc))


def _observe(actions: list[Any], peers: PeerPolicy) -> Observed:
    for action in actions:
        if isinstance(action, Join | Answer):
            return Observed("allowed", None, repr(action))
        if isinstance(action, Deliver):
            routed = route_inbound(peers, Inbound(KEY, action.sender, action.text))
            if isinstance(routed, Routed):
                return Observed("allowed", None, f"to {routed.agent}")
            return Observed("refused", routed.code, routed.detail)
        if isinstance(action, Leave):
            code = "encrypted_room" if "encrypted" in action.reason else "invite_refused"
            return Observed("refused", code, action.reason)
        if isinstance(action, Notice):
            if "Only the configured approvers" in action.text:
                return Observed("refused", "not_an_approver", action.text)
            if "No approval" in action.text:
                return Observed("refused", "unknown_approval", action.text)
            if "Too many messages" in action.text:
                return Observed("refused", "rate_limited", action.text)
            if "encrypted" in action.text:
                return Observed("refused", "encrypted_room", action.text)
    return Observed("refused", "nothing", "no action")


@pytest.mark.parametrize("cell", CELLS, ids=[c.key for c in CELLS])
def test_matrix_channel(cell: Cell, tmp_path: Path) -> None:
    peers = policy(tmp_path)

    def admits(sender: str) -> bool:
        return isinstance(route_inbound(peers, Inbound(KEY, sender, "")), Routed)

    core = MatrixCore(BOT, admits, frozenset({OPS}), rate_per_minute=3)
    core.restore("s0")
    approval_id, _ = core.ask(ROOM, "file_write note.txt")
    action = cell.action
    if action.startswith("invite_"):
        inviter = STRANGER if action == "invite_stranger" else ALICE
        response = sync("s1", invite={ROOM: [member(BOT, "invite", sender=inviter)]})
    elif action.startswith("message_"):
        sender = STRANGER if action == "message_stranger" else ALICE
        response = sync("s1", join={ROOM: [text(sender, "hello")]})
    elif action == "flood":
        response = sync("s1", join={ROOM: [text(ALICE, f"m{i}") for i in range(4)]})
        actions = core.on_sync(response, 0.0)
        record(cell, _observe([a for a in actions if not isinstance(a, Deliver)], peers))
        return
    elif action == "encrypted_room":
        encryption = {
            "type": "m.room.encryption",
            "state_key": "",
            "sender": ALICE,
            "content": {"algorithm": "m.megolm.v1.aes-sha2"},
            "event_id": "$e",
            "origin_server_ts": 1,
        }
        response = sync("s1", join={ROOM: [text(ALICE, "hi")]}, state={ROOM: [encryption]})
    else:
        who, room = {
            "answer_not_approver": (ALICE, ROOM),
            "answer_other_room": (OPS, "!other:hs"),
            "answer_approver": (OPS, ROOM),
        }[action]
        response = sync("s1", join={room: [text(who, f"approve {approval_id}")]})
    record(cell, _observe(core.on_sync(response, 0.0), peers))
