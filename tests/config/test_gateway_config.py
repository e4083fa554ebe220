"""`[gateway]` (issue 29): its shape, its rules, and what its tokens are to the rest of the
config: a channel `api.<name>` each, owned by the agents the token lists, on which peer
groups admit the token's sender like any outside sender."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.config.test_rules import ENV, only, problems
from zeroclaw.bus import Origin, PeerPolicy
from zeroclaw.config import channel_owners, daemon_refusals, validate_document


def with_gateway(doc: dict[str, Any], **gateway: Any) -> dict[str, Any]:
    doc["gateway"] = {
        "operator_token_env": "ZC_OPERATOR",
        "tokens": {"ci": {"token_env": "ZC_CI", "sender": "ci-bot", "agents": ["alpha"]}},
        **gateway,
    }
    return doc


def test_a_gateway_loads_with_its_defaults(doc: dict[str, Any]) -> None:
    config = validate_document(with_gateway(doc), base_dir=Path("/srv/zc"), env=ENV)
    gateway = config.gateway
    assert gateway is not None
    assert gateway.listen == "127.0.0.1:8788"
    assert gateway.tokens["ci"].agents == ("alpha",)
    assert gateway.tokens["ci"].rate_limit_per_minute == 60
    assert "api.ci" in config.channel_ids()


def test_no_gateway_table_is_no_gateway(doc: dict[str, Any]) -> None:
    config = validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)
    assert config.gateway is None
    assert not any(c.startswith("api.") for c in config.channel_ids())


def test_a_tokens_channel_is_owned_by_the_agents_it_lists_whatever_they_bind(
    doc: dict[str, Any],
) -> None:
    with_gateway(doc)
    doc["gateway"]["tokens"]["all"] = {"token_env": "ZC_ALL", "agents": ["beta", "alpha"]}
    config = validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)
    owners = channel_owners(config)
    assert owners["api.ci"] == ("alpha",)
    assert owners["api.all"] == ("alpha", "beta")
    # The webhook's owners are still its bindings.
    assert owners["webhook.ops"] == ("alpha",)


def test_a_peer_group_on_a_tokens_channel_admits_its_sender(doc: dict[str, Any]) -> None:
    with_gateway(doc)
    doc["peer_groups"]["api"] = {
        "channel": "api.ci",
        "agents": ["alpha"],
        "external_peers": ["ci-bot"],
        "tools": ["memory_recall"],
        "approvals": "sender",
    }
    policy = PeerPolicy(validate_document(doc, base_dir=Path("/srv/zc"), env=ENV))
    origin = Origin.api("ci", "CI-Bot")
    assert origin.sender == "ci-bot" and origin.kind == "api"
    assert origin.who == "api.ci:ci-bot"
    assert policy.origin_refusal("alpha", origin) is None
    refused = policy.origin_refusal("beta", origin)
    assert refused is not None and refused[0] == "not_owner"
    grant = policy.origin_grant("alpha", origin)
    assert grant.kind == "api"
    assert grant.tools == frozenset({"memory_recall"})
    # The OpenAI API cannot ask its client: the operator answers, whatever the group says.
    assert grant.approvals == "operator"
    # Another sender on the same token's channel is not admitted.
    assert policy.origin_refusal("alpha", Origin.api("ci", "someone")) is not None


def test_an_api_origin_lives_on_its_tokens_channel_only() -> None:
    with pytest.raises(ValueError, match="not on channel"):
        Origin("webhook.ops", "ci-bot", "api")
    with pytest.raises(ValueError, match="not on channel"):
        Origin("api.ci", "ci-bot", "channel")
    assert Origin.from_sender("api.ci", "@CI-bot") == Origin.api("ci", "ci-bot")


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"listen": "0.0.0.0:8788"}, "gateway.listen", "not a loopback address"),
        ({"listen": "0.0.0.0:8788", "allow_remote": True}, "gateway.allow_remote", "needs TLS"),
        ({"listen": "127.0.0.1:8787"}, "gateway.listen", "channels.webhook.ops"),
        ({"operator_token_env": "ZC_CI"}, "gateway.tokens.ci.token_env", "also"),
        (
            {"tokens": {"Bad": {"token_env": "ZC_X", "agents": ["alpha"]}}},
            "gateway.tokens.Bad",
            "must match",
        ),
        (
            {"tokens": {"ci": {"token_env": "ZC_CI", "agents": ["gamma"]}}},
            "gateway.tokens.ci.agents[0]",
            "unknown agent 'gamma'",
        ),
    ],
)
def test_gateway_rules(doc: dict[str, Any], change: dict[str, Any], key: str, words: str) -> None:
    with_gateway(doc, **change)
    found, message = only(doc)
    assert found == key
    assert words in message


def test_tls_files_go_in_pairs(doc: dict[str, Any]) -> None:
    with_gateway(doc, tls_cert="cert.pem")
    assert "tls_key go together" in " ".join(problems(doc).values())


def test_a_group_on_a_tokens_channel_names_agents_the_token_lists(doc: dict[str, Any]) -> None:
    with_gateway(doc)
    doc["peer_groups"]["api"] = {"channel": "api.ci", "agents": ["beta"]}
    found, message = only(doc)
    assert found == "peer_groups.api.agents[0]"
    assert "lists agent 'beta'" in message
    doc["peer_groups"]["api"] = {"channel": "api.nope", "agents": ["alpha"]}
    found, message = only(doc)
    assert found == "peer_groups.api.channel"
    doc["peer_groups"]["api"] = {"channel": "api", "agents": ["alpha"]}
    validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)


def test_the_daemon_refuses_a_gateway_whose_tokens_are_unset(doc: dict[str, Any]) -> None:
    config = validate_document(with_gateway(doc), base_dir=Path("/srv/zc"), env=ENV)
    env = {"HOOK_SECRET": "s", "ZC_OPERATOR": "op-secret"}
    refusals = {i.key: i.message for i in daemon_refusals(config, env, Path("/srv/zc/zc.toml"))}
    assert "gateway.tokens.ci.token_env" in refusals
    assert "ZC_CI" in refusals["gateway.tokens.ci.token_env"]
    assert "op-secret" not in " ".join(refusals.values())
    env["ZC_CI"] = "ci-secret"
    refusals = {i.key: i.message for i in daemon_refusals(config, env, Path("/srv/zc/zc.toml"))}
    assert not any(k.startswith("gateway") for k in refusals)
