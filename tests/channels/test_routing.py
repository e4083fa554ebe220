"""Inbound routing over generated configs: what `config show` prints (the channel's owners,
each owner's external-peer rule on it) is what the channel host decides, and the router
admits exactly what the host routes. Pure: no sockets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.bus import EMPTY_BODY, Message, Origin, PeerPolicy
from zeroclaw.bus._router_core import Forward, InjectOutcome, RouterCore
from zeroclaw.channels import ChannelRefused, Inbound, Routed, route_inbound
from zeroclaw.config import ConfigError, channel_owners, channel_peers, validate_document

ROOT = Path("/nonexistent/zeroclaw-routing-test")
AGENTS = ("alpha", "beta", "default", "gamma")
HOOKS = ("webhook.a", "webhook.b")
SENDERS = ("bob", "@Bob", "carol", "mallory", "")


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    agents = {}
    for alias in draw(st.lists(st.sampled_from(AGENTS), min_size=1, unique=True)):
        bound = draw(st.lists(st.sampled_from(HOOKS), unique=True))
        agents[alias] = agent_entry(
            channels=["cli.local", *bound] if draw(st.booleans()) else bound,
            enabled=draw(st.booleans()) or alias == "alpha",
        )
    groups = {}
    for n, channel in enumerate(draw(st.lists(st.sampled_from([*HOOKS, "webhook"]), max_size=3))):
        members = [
            a
            for a, e in agents.items()
            if channel in e["channels"] or any(c.startswith(f"{channel}.") for c in e["channels"])
        ]
        if not members:
            continue
        groups[f"g{n}"] = {
            "channel": channel,
            "agents": members,
            "external_peers": draw(st.lists(st.sampled_from(["*", "bob", "@carol"]), max_size=2)),
            "ignore": draw(st.lists(st.sampled_from(["mallory", "BOB"]), max_size=1)),
        }
    doc = make_config(ROOT, agents, groups=groups)
    doc["channels"]["webhook"] = {
        name.split(".")[1]: {"listen": "127.0.0.1:8787", "secret_env": "HOOK_SECRET"}
        for name in HOOKS
    }
    return doc


@settings(max_examples=300, deadline=None)
@given(configs(), st.sampled_from(HOOKS), st.sampled_from(SENDERS))
def test_the_host_decides_what_config_show_prints_and_the_router_agrees(
    doc: dict[str, Any], channel: str, sender: str
) -> None:
    try:
        config = validate_document(doc)
    except ConfigError:
        return  # a generated config the rules refuse says nothing about routing
    policy = PeerPolicy(config)
    decided = route_inbound(policy, Inbound(channel, sender, "hi"))
    owners = channel_owners(config)[channel]
    if not owners:
        assert isinstance(decided, ChannelRefused) and decided.code == "no_owner"
        return
    # The deterministic fallback: the first owner `config show` lists.
    accepted = channel_peers(config, owners[0], channel).external.accepts(sender)
    if not accepted:
        assert isinstance(decided, ChannelRefused), decided
        assert decided.code in ("sender_ignored", "sender_not_accepted")
    else:
        assert decided == Routed(owners[0], Origin(channel, sender))
    # The router, which checks every injected origin again, admits exactly the same.
    core = RouterCore(config)
    core.hello(owners[0], b"conn", 1, 0.0)
    core.take()
    message = Message(
        id="m", to=owners[0], channel=channel, body=EMPTY_BODY, sent_at=0.0, kind="chat"
    )
    core.inject(message, Origin(channel, sender), 0.0)
    [action] = [a for a in core.take() if isinstance(a, Forward | InjectOutcome)]
    assert isinstance(action, Forward) == isinstance(decided, Routed)


def test_a_named_agent_must_bind_the_channel_and_the_owner_is_the_first_bound() -> None:
    doc = make_config(
        ROOT,
        {
            "beta": agent_entry(channels=["webhook.a"]),
            "alpha": agent_entry(channels=["webhook.a"]),
            "gamma": agent_entry(),
        },
        groups={"g": {"channel": "webhook", "agents": ["alpha", "beta"], "external_peers": ["*"]}},
    )
    doc["channels"]["webhook"] = {"a": {"listen": "127.0.0.1:8787", "secret_env": "S"}}
    policy = PeerPolicy(validate_document(doc))
    assert route_inbound(policy, Inbound("webhook.a", "x", "hi")) == Routed(
        "alpha", Origin("webhook.a", "x")
    )
    named = route_inbound(policy, Inbound("webhook.a", "x", "hi", agent="beta"))
    assert isinstance(named, Routed) and named.agent == "beta"
    refused = route_inbound(policy, Inbound("webhook.a", "x", "hi", agent="gamma"))
    assert isinstance(refused, ChannelRefused) and refused.code == "agent_not_bound"
