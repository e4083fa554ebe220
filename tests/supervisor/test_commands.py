"""The control commands' decisions that need no daemon: what a reply says, and when."""

from __future__ import annotations

from tests.control.test_protocol import agent_status
from zeroclaw.control import ProbeReply, RouteProbe
from zeroclaw.supervisor._commands import agent_reply, reload_reply
from zeroclaw.supervisor._reload import ReloadState
from zeroclaw.supervisor._route_probe import probe_refusal


def test_an_agent_command_that_settled_running_is_ok() -> None:
    reply = agent_reply("alpha", True, agent_status())
    assert reply.ok and reply.data == agent_status() and reply.error is None


def test_an_agent_command_that_did_not_settle_is_a_timeout_with_the_status() -> None:
    reply = agent_reply("alpha", False, agent_status(state="starting"))
    assert not reply.ok and reply.error == "timeout" and reply.data is not None


def test_an_agent_that_settled_fatal_is_an_error() -> None:
    reply = agent_reply("alpha", True, agent_status(state="fatal"))
    assert not reply.ok and reply.error == "fatal"


def test_reload_replies_by_outcome() -> None:
    diff = {"added": ["x"], "removed": [], "changed": []}
    ok = reload_reply(ReloadState("ok", 1.0, [], diff))
    assert ok.ok and ok.data is not None and ok.data.diff == diff
    refused = reload_reply(ReloadState("reload_failed", 1.0, ["bad"], {}))
    assert refused.error == "reload_failed" and refused.data is not None
    assert refused.data.errors == ["bad"]
    late = reload_reply(ReloadState("incomplete", 1.0, ["agent a did not stop"], diff))
    assert not late.ok and late.error == "timeout" and late.data is not None
    assert late.data.reload == "incomplete"


def test_a_probe_names_the_unknown_alias_without_a_route() -> None:
    reply = probe_refusal(RouteProbe(from_="alpha", to="zeta"), {"alpha"}, None, True)
    assert reply is not None and reply.error == "unknown_agent"
    assert reply.data == ProbeReply("unknown_agent")
    assert "zeta" in (reply.message or "")


def test_a_probe_without_a_channel_is_not_peers() -> None:
    reply = probe_refusal(RouteProbe(from_="a", to="b"), {"a", "b"}, None, True)
    assert reply is not None and reply.error == "not_peers"
    assert reply.data == ProbeReply("not_peers", "a", "b", None)


def test_a_probe_from_a_stopped_agent_is_unavailable() -> None:
    reply = probe_refusal(RouteProbe(from_="a", to="b"), {"a", "b"}, "cli.local", False)
    assert reply is not None and reply.error == "unavailable"
    assert reply.data == ProbeReply("unavailable", "a", "b", "cli.local")


def test_a_probe_that_can_be_sent_has_no_refusal() -> None:
    assert probe_refusal(RouteProbe(from_="a", to="b"), {"a", "b"}, "cli.local", True) is None
