"""Which tools a turn gets by its origin, and who answers its approvals (ADR 0042): the
pure decision, exhaustively over every agent tool x the group configurations one or two
peer groups on a channel can make (admitting or not, ignoring or not, granting the tool,
another or both, trusting the sender with approvals or not)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.conformance._registries import agent_tools
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.bus import GroupGrant, Origin, PeerPolicy, origin_grant, sender_grant
from zeroclaw.config import ExternalPeerRule, validate_document

SENDER = "ci-bot"
OTHER = "someone-else"
TOOLS = sorted(agent_tools())

# One group's stance towards SENDER: (admits it, ignores it, tools it lists, approvals).
Stance = tuple[bool, bool, str, str]
TOOL_CHOICES = ("none", "it", "other", "both")
STANCES: list[Stance] = list(
    itertools.product((True, False), (True, False), TOOL_CHOICES, ("operator", "sender"))
)


def group(name: str, stance: Stance, tool: str, other: str) -> GroupGrant:
    admits, ignores, tools, approvals = stance
    listed = {"none": set(), "it": {tool}, "other": {other}, "both": {tool, other}}[tools]
    rule = ExternalPeerRule(
        allow_any=False,
        allowed=frozenset({SENDER if admits else OTHER}),
        ignored=frozenset({SENDER} if ignores else ()),
    )
    return GroupGrant(name, rule, frozenset(listed), approvals)  # type: ignore[arg-type]


@pytest.mark.parametrize("tool", TOOLS)
def test_an_outside_sender_gets_a_tool_only_from_a_group_that_admits_it_and_lists_it(
    tool: str,
) -> None:
    other = next(t for t in TOOLS if t != tool)
    for stances in itertools.chain(
        ((),), ((s,) for s in STANCES), itertools.product(STANCES, STANCES)
    ):
        groups = [group(f"g{i}", s, tool, other) for i, s in enumerate(stances)]
        grant = sender_grant(groups, SENDER)
        ignored = any(s[1] for s in stances)
        admitting = [s for s in stances if s[0] and not s[1]] if not ignored else []
        granted = any(s[2] in ("it", "both") for s in admitting)
        assert grant.kind == "channel"
        assert grant.tools is not None, "an outside sender never gets the whole toolset"
        assert (tool in grant.tools) == granted, (stances, grant)
        to_sender = bool(admitting) and all(s[3] == "sender" for s in admitting)
        assert grant.approvals == ("channel" if to_sender else "operator"), (stances, grant)
        assert grant.groups == tuple(
            f"g{i}" for i, s in enumerate(stances) if not ignored and s[0] and not s[1]
        )


def test_no_group_and_no_listed_tools_is_no_tool_at_all() -> None:
    assert sender_grant([], SENDER).tools == frozenset()
    admits = group("open", (True, False, "none", "sender"), TOOLS[0], TOOLS[1])
    assert sender_grant([admits], SENDER).tools == frozenset()


@pytest.mark.parametrize(
    ("origin", "kind"),
    [
        (Origin("cli"), "operator"),
        (Origin("cli.local"), "operator"),
        (Origin.subagent("alpha"), "subagent"),
        (Origin("webhook.ops", "bob"), "channel"),
        (Origin("serial.bench", "serial:bench"), "channel"),
        (Origin("some.future.way_in", "x"), "channel"),
    ],
)
def test_origin_kinds_and_who_keeps_the_whole_toolset(origin: Origin, kind: str) -> None:
    assert origin.kind == kind
    anyone = ExternalPeerRule(allow_any=True, allowed=frozenset(), ignored=frozenset())
    grant = origin_grant(origin, [GroupGrant("g", anyone, frozenset({"shell", "x"}), "sender")])
    if kind == "channel":
        assert grant.tools == frozenset({"shell", "x"})
    else:  # the operator and a sub-agent dispatch keep what they had (ADR 0042)
        assert grant.tools is None and grant.tool_names() is None


def _config(**group: Any) -> Any:
    def configure(doc: dict[str, Any]) -> None:
        doc["channels"]["webhook"] = {"ops": {"listen": "127.0.0.1:8787", "secret_env": "K"}}
        doc["agents"]["alpha"]["channels"] = ["cli.local", "webhook.ops"]
        doc["peer_groups"]["hooks"] = {
            "channel": "webhook.ops",
            "agents": ["alpha"],
            "external_peers": ["*"],
            **group,
        }
        doc["peer_groups"]["ci"] = {
            "channel": "webhook.ops",
            "agents": ["alpha"],
            "external_peers": ["@CI-Bot"],
            "tools": ["memory_recall"],
        }

    return configure


def test_the_policy_grants_by_the_groups_that_admit_the_sender(tmp_path: Any) -> None:
    doc = make_config(tmp_path, {"alpha": agent_entry()})
    _config(tools=["file_read"], approvals="sender")(doc)
    policy = PeerPolicy(validate_document(doc))
    anyone = policy.origin_grant("alpha", Origin("webhook.ops", "stranger"))
    assert anyone.tools == frozenset({"file_read"}) and anyone.approvals == "channel"
    # The same normalised sender as admission: case and a leading @ do not matter.
    for spelling in ("ci-bot", "CI-BOT", "@ci-bot"):
        ci = policy.origin_grant("alpha", Origin("webhook.ops", spelling))
        assert ci.tools == frozenset({"file_read", "memory_recall"}), spelling
        assert ci.approvals == "operator" and ci.groups == ("ci", "hooks")
    assert policy.origin_grant("alpha", Origin("cli.local")).tools is None
    # A channel the agent has no group on grants nothing.
    assert policy.origin_grant("alpha", Origin("webhook.nope", "x")).tools == frozenset()


def test_config_validate_catches_an_unknown_tool_on_a_peer_group(tmp_path: Any) -> None:
    from zeroclaw.config import ConfigError

    doc = make_config(tmp_path, {"alpha": agent_entry()})
    _config(tools=["memory_recal"])(doc)
    with pytest.raises(ConfigError) as caught:
        validate_document(doc)
    lines = "\n".join(caught.value.lines())
    assert "peer_groups.hooks.tools" in lines or "peer_groups.hooks.tools[0]" in lines, lines
    assert "memory_recal" in lines and "memory_recall" in lines
    doc["peer_groups"]["hooks"]["tools"] = ["shell", "shell"]
    with pytest.raises(ConfigError, match="listed more than once"):
        validate_document(doc)
    doc["peer_groups"]["hooks"]["tools"] = []
    doc["peer_groups"]["hooks"]["approvals"] = "anyone"
    with pytest.raises(ConfigError):
        validate_document(doc)


def test_a_peer_origin_injected_as_a_turn_gets_no_tool() -> None:
    grant = origin_grant(Origin.peer("beta"))
    assert grant.kind == "peer" and grant.tools == frozenset()


def _scheduled(tmp_path: Any) -> PeerPolicy:
    doc = make_config(tmp_path, {"alpha": agent_entry(), "beta": agent_entry()})
    _config(tools=["file_read"])(doc)
    doc["agents"]["alpha"]["schedules"] = {
        "morning": {"every": "1h", "text": "x", "tools": ["file_read", "memory_recall"]},
        "bare": {"every": "1h", "text": "x"},
    }
    doc["agents"]["alpha"]["heartbeat"] = {"every": "30m", "tools": ["file_list"]}
    return PeerPolicy(validate_document(doc))


def test_a_schedules_turn_gets_its_own_tools_only_and_the_operator_answers(tmp_path: Any) -> None:
    policy = _scheduled(tmp_path)
    grant = policy.origin_grant("alpha", Origin.schedule("alpha", "morning"))
    assert grant.kind == "schedule" and grant.approvals == "operator"
    assert grant.tools == frozenset({"file_read", "memory_recall"})
    # none by default; the heartbeat's own; an agent's reminder (not in the config): none
    assert policy.origin_grant("alpha", Origin.schedule("alpha", "bare")).tools == frozenset()
    heartbeat = policy.origin_grant("alpha", Origin.schedule("alpha", "heartbeat"))
    assert heartbeat.tools == frozenset({"file_list"})
    reminder = policy.origin_grant("alpha", Origin.schedule("alpha", "reminder-1"))
    assert reminder.tools == frozenset()
    assert origin_grant(Origin.schedule("alpha", "morning")).tools == frozenset()


def test_a_schedule_origin_enters_its_own_agent_only(tmp_path: Any) -> None:
    policy = _scheduled(tmp_path)
    assert policy.origin_refusal("alpha", Origin.schedule("alpha", "morning")) is None
    refused = policy.origin_refusal("beta", Origin.schedule("alpha", "morning"))
    assert refused is not None and refused[0] == "not_owner"
    # A sender cannot write on the schedule channel, nor name a schedule as itself.
    with pytest.raises(ValueError, match="not a channel a sender writes on"):
        Origin.from_sender("schedule", "alpha.morning")
    assert Origin("webhook.ops", "alpha.morning").kind == "channel"
