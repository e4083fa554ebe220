"""The peer-group policy, exhaustively and as properties."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import DEMO_CONFIG
from zeroclaw.bus import PeerPolicy
from zeroclaw.config import load_config, validate_document

ENV = {"HOME": "/h"}


def demo() -> PeerPolicy:
    return PeerPolicy(load_config(DEMO_CONFIG))


def test_demo_topology() -> None:
    policy = demo()
    assert policy.allowed("alpha", "beta", "cli.local")
    assert policy.allowed("beta", "alpha", "cli.local")
    for a, b in [("alpha", "gamma"), ("gamma", "alpha"), ("beta", "gamma"), ("gamma", "beta")]:
        assert not policy.allowed(a, b, "cli.local")
        assert policy.decide(a, b).code == "not_peers"
    decision = policy.decide("alpha", "beta")
    assert decision.allowed and decision.group == "ops" and decision.channel == "cli.local"
    assert "'gamma' is in no peer group" in policy.decide("gamma", "beta").reason


def test_unknown_agents_self_and_unknown_channel() -> None:
    policy = demo()
    assert policy.decide("alpha", "zeta").code == "unknown_agent"
    assert policy.decide("zeta", "alpha").code == "unknown_agent"
    assert policy.decide("alpha", "alpha").code == "not_peers"
    assert policy.decide("alpha", "beta", "webhook.nope").code == "not_peers"
    assert not policy.allowed("alpha", "beta", "webhook.nope")


def test_default_channel() -> None:
    policy = demo()
    assert policy.default_channel("alpha", "beta") == "cli.local"
    assert policy.default_channel("gamma", "beta") == "cli.local"  # its own binding


def _doc(groups: dict[str, Any], agents: list[str], channels: list[str]) -> dict[str, Any]:
    kinds: dict[str, dict[str, Any]] = {}
    for ch in channels:
        kind, alias = ch.split(".")
        kinds.setdefault(kind, {})[alias] = (
            {"listen": "127.0.0.1:1", "secret_env": "S"}
            if kind == "webhook"
            else {"port": "/dev/null"}
            if kind == "serial"
            else {}
        )
    return {
        "providers": {"offline": {"default": {}}},
        "risk_profiles": {"r": {"level": "readonly"}},
        "runtime_profiles": {"d": {}},
        "channels": kinds,
        "agents": {
            a: {
                "model_provider": "offline.default",
                "risk_profile": "r",
                "runtime_profile": "d",
                "channels": channels,
                "workspace": {"path": f"/w/{a}"},
            }
            for a in agents
        },
        "peer_groups": groups,
    }


AGENTS = ["a", "b", "c", "d", "e"]
CHANNELS = ["cli.x", "cli.y", "webhook.h"]
GROUP_CHANNELS = ["cli", "webhook", *CHANNELS]


@st.composite
def topologies(draw: st.DrawFn) -> dict[str, Any]:
    groups = {}
    for i in range(draw(st.integers(0, 5))):
        members = draw(st.lists(st.sampled_from(AGENTS), min_size=1, max_size=4, unique=True))
        groups[f"g{i}"] = {"channel": draw(st.sampled_from(GROUP_CHANNELS)), "agents": members}
    return _doc(groups, AGENTS, CHANNELS)


def _shares_group(doc: dict[str, Any], a: str, b: str, channel: str) -> bool:
    for group in doc["peer_groups"].values():
        ch = group["channel"]
        on_channel = ch == channel if "." in ch else channel.startswith(ch + ".")
        if on_channel and a in group["agents"] and b in group["agents"]:
            return True
    return False


@settings(max_examples=200, deadline=None)
@given(topologies())
def test_policy_properties(doc: dict[str, Any]) -> None:
    policy = PeerPolicy(validate_document(doc, env=ENV))
    grouped = {a for g in doc["peer_groups"].values() for a in g["agents"]}
    for a, b in itertools.permutations(AGENTS, 2):
        for channel in CHANNELS:
            allowed = policy.allowed(a, b, channel)
            # symmetric
            assert allowed == policy.allowed(b, a, channel)
            # exactly the pairs that share a group on that channel
            assert allowed == _shares_group(doc, a, b, channel)
            # explain agrees with the router's hot path
            assert policy.decide(a, b, channel).allowed == allowed
        # an agent in no group reaches no one
        if a not in grouped:
            assert not any(policy.allowed(a, b, ch) for ch in CHANNELS)
            assert policy.decide(a, b).code == "not_peers"
    for a in AGENTS:
        assert not any(policy.allowed(a, a, ch) for ch in CHANNELS)


def test_external_senders() -> None:
    doc = _doc(
        {
            "g": {"channel": "cli.x", "agents": ["a"], "external_peers": ["@Ops"], "ignore": []},
            "h": {"channel": "cli", "agents": ["b"], "external_peers": ["*"], "ignore": ["spam"]},
        },
        ["a", "b"],
        ["cli.x", "cli.y"],
    )
    policy = PeerPolicy(validate_document(doc, env=ENV))
    assert policy.external_accepted("cli.x", "ops") == ("a", "b")
    assert policy.external_accepted("cli.x", "OPS") == ("a", "b")
    assert policy.external_accepted("cli.x", "someone") == ("b",)
    assert policy.external_accepted("cli.x", "@spam") == ()
    assert policy.external_accepted("cli.y", "ops") == ("b",)
