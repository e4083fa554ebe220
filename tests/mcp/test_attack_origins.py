"""The attack pass on MCP tools and where a turn came from (issue 26, ADR 0042), through a real
daemon with a webhook channel: an outside sender gets an MCP tool only where a peer group that
admits it lists it, a tool that is not read-only still asks, and the question goes to the
operator's queue, never to the sender; a peer asked along the way gets only what its own
`peer_tools` and the chain's origin both grant, and nobody to approve for it.

alpha answers the webhook and uses the hostile server h (echo and read are read-only, write
is not); beta uses h too and lists all three in its `peer_tools`. Anyone may talk to alpha
with echo; `ci-bot` also gets write and may ask beta (the union of its groups)."""

from __future__ import annotations

import json
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.channels.test_channels_daemon import free_port, wait_serving
from tests.channels.test_origin_tools_daemon import cli_json, codes, say, signed
from tests.known_secrets import HOOK_SECRET
from tests.supervisor.harness import Daemon, agent_entry, make_config

HOSTILE = Path(__file__).with_name("hostile_server.py")


def world(root: Path, daemons: Any) -> tuple[Daemon, int, dict[str, Path]]:
    port = free_port()
    spaces = {alias: root / "ws" / alias for alias in ("alpha", "beta")}
    for ws in spaces.values():
        ws.mkdir(parents=True)
        shutil.copy(HOSTILE, ws / "hostile_server.py")
    doc = make_config(
        root,
        {
            "alpha": agent_entry(
                channels=["cli.local", "webhook.ops"],
                workspace={"path": str(spaces["alpha"])},
                mcp=["h"],
            ),
            "beta": agent_entry(
                workspace={"path": str(spaces["beta"])},
                mcp=["h"],
                peer_tools=["mcp__h__echo", "mcp__h__read", "mcp__h__write"],
            ),
        },
    )
    doc["channels"]["webhook"] = {
        "ops": {"listen": f"127.0.0.1:{port}", "secret_env": "HOOK_SECRET"}
    }
    doc["mcp_servers"] = {
        "h": {
            "command": sys.executable,
            "args": ["hostile_server.py", "ok"],
            "tools": ["echo", "read", "write"],
        }
    }
    doc["peer_groups"] = {
        "team": {"channel": "cli", "agents": ["alpha", "beta"]},
        "hooks": {
            "channel": "webhook.ops",
            "agents": ["alpha"],
            "external_peers": ["*"],
            "tools": ["mcp__h__echo"],
        },
        "ci": {
            "channel": "webhook.ops",
            "agents": ["alpha"],
            "external_peers": ["ci-bot"],
            "tools": ["mcp__h__write", "send_message_to_peer"],
        },
    }
    daemon: Daemon = daemons(doc, faults=False)
    daemon.start(HOOK_SECRET=HOOK_SECRET)
    wait_serving(daemon, "webhook.ops")
    return daemon, port, spaces


def write(path: str) -> str:
    return "mcp h write " + json.dumps({"path": path})


def test_attack_an_outside_sender_gets_only_the_mcp_tools_its_groups_list(
    root: Path, daemons: Any
) -> None:
    daemon, port, spaces = world(root, daemons)
    echoed = say(port, "stranger", 'mcp h echo {"text": "hi"}')
    assert codes(echoed) == [None] and echoed["reply"] == "hi", echoed
    # read-only, allowed by the config, offered to the agent: not listed for the sender
    read = say(port, "stranger", "mcp h read " + json.dumps({"path": "hostile_server.py"}))
    assert codes(read) == ["tool_not_granted"], read
    assert codes(say(port, "stranger", write("stranger.txt"))) == ["tool_not_granted"]
    # a tool outside the server's allowlist is not anyone's, and a name the agent does not
    # have at all is refused the same way for a sender as for the operator
    assert codes(say(port, "stranger", "mcp h env")) == ["mcp_tool_not_allowed"]
    assert codes(say(port, "stranger", "mcp h__echo x")) == ["mcp_tool_not_allowed"]
    # the operator's own chat keeps them all
    own = "mcp h read " + json.dumps({"path": "hostile_server.py"})
    mine = daemon.cli("-a", "alpha", "chat", "-m", own, "--json")
    assert json.loads(mine.stdout)["tool_calls"][0]["error_code"] is None, mine.stdout
    assert not (spaces["alpha"] / "stranger.txt").exists()


def test_attack_a_senders_mcp_write_waits_for_the_operator_and_the_sender_cannot_answer(
    root: Path, daemons: Any
) -> None:
    daemon, port, spaces = world(root, daemons)
    got: list[httpx.Response] = []
    body = {"sender": "ci-bot", "text": write("ci.txt")}
    thread = threading.Thread(
        target=lambda: got.append(signed(port, "/v1/channels/ops/messages", body, 120))
    )
    thread.start()
    status = daemon.wait_for(lambda s: len(s.get("approvals", [])) == 1)
    [approval] = status["approvals"]
    assert (approval["agent"], approval["channel"], approval["sender"]) == (
        "alpha",
        "webhook.ops",
        "ci-bot",
    )
    assert approval["what"].startswith("call mcp__h__write "), approval
    forged = signed(port, f"/v1/channels/ops/approvals/{approval['id']}", {"approved": True})
    assert (forged.status_code, forged.json()["error"]) == (404, "unknown_approval")
    assert not (spaces["alpha"] / "ci.txt").exists()
    assert cli_json(daemon, "approvals", "deny", approval["id"])["approved"] is False
    thread.join(120)
    assert got and codes(got[0].json()) == ["approval_denied"], got
    assert not (spaces["alpha"] / "ci.txt").exists()


def test_attack_a_peer_asked_by_a_senders_turn_gets_its_peer_tools_and_the_origins_only(
    root: Path, daemons: Any
) -> None:
    daemon, port, spaces = world(root, daemons)
    # beta's peer_tools list read, ci-bot's groups do not: the chain's origin decides
    read = say(port, "ci-bot", "ask beta: mcp h read " + json.dumps({"path": "x"}))
    assert codes(read) == [None], read
    assert "refused: tool_not_granted" in read["reply"], read
    # echo is in both: beta runs it
    echo = say(port, "ci-bot", 'ask beta: mcp h echo {"text": "relayed"}')
    assert echo["reply"] == "beta says: relayed", echo
    # write is in both: the peer's turn has it, and nobody to ask, so it is denied there
    # (and nothing waits in the operator's queue for it)
    asked = say(port, "ci-bot", "ask beta: " + write("peer.txt"))
    assert codes(asked) == [None], asked
    assert "refused: approval_denied" in asked["reply"], asked
    assert daemon.status().get("approvals", []) == []
    assert not (spaces["beta"] / "peer.txt").exists()
    # a sender whose groups do not grant asking cannot reach beta at all
    assert codes(say(port, "stranger", "ask beta: mcp h echo {}")) == ["tool_not_granted"]
