"""One test per validation rule of SPEC §3: each config breaks only that rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zeroclaw.config import ConfigError, validate_document

ENV = {"HOME": "/home/op"}


def problems(doc: dict[str, Any]) -> dict[str, str]:
    """Validate and return {dotted key path: message}; fails if the doc is valid."""
    with pytest.raises(ConfigError) as info:
        validate_document(doc, source="zc.toml", base_dir=Path("/srv/zc"), env=ENV)
    return {issue.key: issue.message for issue in info.value.issues}


def only(doc: dict[str, Any]) -> tuple[str, str]:
    found = problems(doc)
    assert len(found) == 1, found
    return next(iter(found.items()))


def test_valid_document_loads(doc: dict[str, Any]) -> None:
    config = validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)
    assert set(config.agents) == {"alpha", "beta"}


# --------------------------------------------------------------------------- alias syntax


@pytest.mark.parametrize("bad", ["Alpha", "1abc", "a" * 33, "a.b", "al pha", "é"])
def test_agent_alias_syntax(doc: dict[str, Any], bad: str) -> None:
    doc["agents"][bad] = {"enabled": False}
    key, message = only(doc)
    assert key.startswith("agents.") and bad in key.replace('"', "")
    assert "[a-z][a-z0-9_-]{0,31}" in message


def test_alias_syntax_applies_to_every_named_table(doc: dict[str, Any]) -> None:
    doc["risk_profiles"]["Loud"] = {"level": "readonly"}
    doc["runtime_profiles"]["X"] = {}
    doc["providers"]["offline"]["Big"] = {}
    doc["channels"]["cli"]["UP"] = {}
    assert set(problems(doc)) == {
        "risk_profiles.Loud",
        "runtime_profiles.X",
        "providers.offline.Big",
        "channels.cli.UP",
    }


def test_longest_alias_is_accepted(doc: dict[str, Any]) -> None:
    doc["agents"]["a" + "b" * 31] = {"enabled": False}
    validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)


# --------------------------------------------------------------------------- reserved


@pytest.mark.parametrize("name", ["daemon", "cli", "system", "all"])
def test_reserved_alias(doc: dict[str, Any], name: str) -> None:
    doc["agents"][name] = {"enabled": False}
    key, message = only(doc)
    assert key == f"agents.{name}"
    assert "reserved" in message


# --------------------------------------------------------------------------- references


def test_unknown_provider_with_hint(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["model_provider"] = "offline.defualt"
    key, message = only(doc)
    assert key == "agents.alpha.model_provider"
    assert "did you mean 'offline.default'?" in message


def test_provider_reference_needs_kind_and_alias(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["model_provider"] = "offline"
    key, message = only(doc)
    assert key == "agents.alpha.model_provider"
    assert "'<kind>.<alias>'" in message and "did you mean 'offline.default'?" in message


def test_unknown_risk_profile(doc: dict[str, Any]) -> None:
    doc["agents"]["beta"]["risk_profile"] = "supervisd"
    key, message = only(doc)
    assert key == "agents.beta.risk_profile"
    assert "unknown risk profile 'supervisd'" in message


def test_unknown_runtime_profile(doc: dict[str, Any]) -> None:
    doc["agents"]["beta"]["runtime_profile"] = "defualt"
    key, message = only(doc)
    assert key == "agents.beta.runtime_profile"
    assert "did you mean 'default'?" in message


def test_unknown_channel_binding(doc: dict[str, Any]) -> None:
    doc["agents"]["beta"]["channels"] = ["cli.local", "cli.locl"]
    key, message = only(doc)
    assert key == "agents.beta.channels[1]"
    assert "did you mean 'cli.local'?" in message


def test_unknown_delegate(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["delegates"] = ["betta"]
    key, message = only(doc)
    assert key == "agents.alpha.delegates[0]"
    assert "did you mean 'beta'?" in message


def test_unknown_access_grant_target(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["workspace"]["access"] = {"zeta": "read"}
    key, message = only(doc)
    assert key == "agents.alpha.workspace.access.zeta"
    assert "unknown agent 'zeta'" in message


def test_unknown_read_memory_from(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["memory"]["read_memory_from"] = ["bet"]
    key, message = only(doc)
    assert key == "agents.alpha.memory.read_memory_from[0]"
    assert "did you mean 'beta'?" in message


def test_unknown_peer_group_member(doc: dict[str, Any]) -> None:
    doc["peer_groups"]["ops"]["agents"] = ["alpha", "betaa"]
    key, message = only(doc)
    assert key == "peer_groups.ops.agents[1]"
    assert "did you mean 'beta'?" in message


def test_unknown_peer_group_channel_alias(doc: dict[str, Any]) -> None:
    doc["peer_groups"]["ops"]["channel"] = "cli.remote"
    key, message = only(doc)
    assert key == "peer_groups.ops.channel"
    assert "unknown channel 'cli.remote'" in message


def test_unknown_peer_group_channel_type(doc: dict[str, Any]) -> None:
    doc["peer_groups"]["ops"]["channel"] = "webhok"
    key, message = only(doc)
    assert key == "peer_groups.ops.channel"
    assert "did you mean 'webhook'?" in message


def test_peer_group_channel_type_without_any_channel(doc: dict[str, Any]) -> None:
    doc["peer_groups"]["ops"]["channel"] = "serial"
    key, message = only(doc)
    assert key == "peer_groups.ops.channel"
    assert "no channel of type 'serial'" in message


def test_reference_to_broken_entry_is_not_reported_twice(doc: dict[str, Any]) -> None:
    doc["risk_profiles"]["sup"]["level"] = "godmode"
    found = problems(doc)
    assert list(found) == ["risk_profiles.sup.level"]


# --------------------------------------------------------------------------- self references


def test_self_delegation(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["delegates"] = ["beta", "alpha"]
    key, message = only(doc)
    assert key == "agents.alpha.delegates[1]"
    assert "itself" in message


def test_self_access_grant(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["workspace"]["access"] = {"alpha": "read_write"}
    key, _ = only(doc)
    assert key == "agents.alpha.workspace.access.alpha"


def test_self_memory_grant(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["memory"]["read_memory_from"] = ["alpha"]
    key, _ = only(doc)
    assert key == "agents.alpha.memory.read_memory_from[0]"


# --------------------------------------------------------------------------- enabled agents


@pytest.mark.parametrize("field", ["model_provider", "risk_profile", "runtime_profile"])
def test_enabled_agent_needs_field(doc: dict[str, Any], field: str) -> None:
    del doc["agents"]["beta"][field]
    key, message = only(doc)
    assert key == f"agents.beta.{field}"
    assert "enabled agent" in message


def test_disabled_agent_may_be_incomplete(doc: dict[str, Any]) -> None:
    doc["agents"]["spare"] = {"enabled": False}
    validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)


# --------------------------------------------------------------------------- peer-group binding


def test_peer_group_member_must_bind_channel(doc: dict[str, Any]) -> None:
    doc["peer_groups"]["ops"]["channel"] = "webhook.ops"
    key, message = only(doc)
    assert key == "peer_groups.ops.agents[1]"
    assert "'beta' does not bind channel 'webhook.ops'" in message


def test_with_no_binding_anywhere_the_fallback_owner_may_be_in_a_group_on_any_channel(
    doc: dict[str, Any],
) -> None:
    # A legacy install: no agent binds a channel, so the fallback owner (the smallest
    # enabled alias, alpha) owns every channel, and a group admitting outside senders on
    # the webhook may name it. Another agent still needs a binding of its own.
    for agent in doc["agents"].values():
        agent.pop("channels", None)
    doc["peer_groups"] = {
        "hooks": {"channel": "webhook.ops", "agents": ["alpha"], "external_peers": ["ci-bot"]}
    }
    validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)
    doc["peer_groups"]["hooks"]["agents"] = ["alpha", "beta"]
    key, message = only(doc)
    assert key == "peer_groups.hooks.agents[1]"
    assert "'beta' does not bind channel 'webhook.ops'" in message


def test_bare_type_group_accepts_any_channel_of_that_type(doc: dict[str, Any]) -> None:
    doc["peer_groups"]["hooks"] = {"channel": "webhook", "agents": ["alpha"]}
    validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)


# --------------------------------------------------------------------------- workspaces


def test_shared_workspace(doc: dict[str, Any]) -> None:
    doc["agents"]["beta"]["workspace"]["path"] = "ws/alpha"
    key, message = only(doc)
    assert key == "agents.beta.workspace.path"
    assert "same workspace as agents.alpha" in message


def test_shared_workspace_through_different_spellings(doc: dict[str, Any]) -> None:
    doc["agents"]["beta"]["workspace"]["path"] = "/srv/zc/ws/./x/../alpha"
    key, _ = only(doc)
    assert key == "agents.beta.workspace.path"


def test_nested_workspace(doc: dict[str, Any]) -> None:
    doc["agents"]["beta"]["workspace"]["path"] = "ws/alpha/inner"
    key, message = only(doc)
    assert key == "agents.beta.workspace.path"
    assert "nested" in message


def test_explicit_workspace_colliding_with_default(doc: dict[str, Any]) -> None:
    del doc["agents"]["alpha"]["workspace"]["path"]
    doc["agents"]["beta"]["workspace"]["path"] = "state/agents/alpha/workspace"
    key, _ = only(doc)
    assert key == "agents.beta.workspace.path"


# --------------------------------------------------------------------------- shape rules (pydantic)


def test_unknown_top_level_key_hint(doc: dict[str, Any]) -> None:
    doc["peer_group"] = {}
    key, message = only(doc)
    assert key == "peer_group"
    assert message == "unknown key 'peer_group' (did you mean 'peer_groups'?)"


def test_unknown_nested_key_hint(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["workspace"]["acess"] = {}
    key, message = only(doc)
    assert key == "agents.alpha.workspace.acess"
    assert "did you mean 'access'?" in message


def test_unknown_restart_key_hint(doc: dict[str, Any]) -> None:
    doc["runtime_profiles"]["default"]["restart"] = {"max_restart": 3}
    key, message = only(doc)
    assert key == "runtime_profiles.default.restart.max_restart"
    assert "did you mean 'max_restarts'?" in message


def test_unknown_provider_kind_hint(doc: dict[str, Any]) -> None:
    doc["providers"]["opneai"] = {"x": {}}
    key, message = only(doc)
    assert key == "providers.opneai"
    assert "did you mean 'openai'?" in message


def test_secret_pasted_as_env_var_name_is_not_echoed(doc: dict[str, Any]) -> None:
    secret = "sk-live-0123456789abcdef"
    doc["providers"]["openai"] = {"cloud": {"model": "m", "api_key_env": secret}}
    key, message = only(doc)
    assert key == "providers.openai.cloud.api_key_env"
    assert secret not in message


def test_secret_value_key_is_refused_without_echo(doc: dict[str, Any]) -> None:
    secret = "sk-live-0123456789abcdef"
    doc["providers"]["openai"] = {"cloud": {"model": "m", "api_key": secret}}
    key, message = only(doc)
    assert key == "providers.openai.cloud.api_key"
    assert "did you mean 'api_key_env'?" in message
    assert secret not in message


def test_backoff_order(doc: dict[str, Any]) -> None:
    doc["runtime_profiles"]["default"]["restart"] = {
        "backoff_initial_secs": 10,
        "backoff_max_secs": 5,
    }
    key, message = only(doc)
    assert key == "runtime_profiles.default.restart"
    assert "backoff_max_secs" in message


def test_wrong_type(doc: dict[str, Any]) -> None:
    doc["daemon"]["shutdown_grace_secs"] = "ten"
    key, _ = only(doc)
    assert key == "daemon.shutdown_grace_secs"


def test_infinity_refused(doc: dict[str, Any]) -> None:
    doc["daemon"]["shutdown_grace_secs"] = float("inf")
    key, _ = only(doc)
    assert key == "daemon.shutdown_grace_secs"


def test_webhook_listen_format(doc: dict[str, Any]) -> None:
    doc["channels"]["webhook"]["ops"]["listen"] = "8787"
    key, _ = only(doc)
    assert key == "channels.webhook.ops.listen"


def test_missing_required_key(doc: dict[str, Any]) -> None:
    del doc["peer_groups"]["ops"]["channel"]
    key, message = only(doc)
    assert key == "peer_groups.ops.channel"
    assert message == "required key is missing"


def test_allowed_commands_are_bare_names(doc: dict[str, Any]) -> None:
    doc["risk_profiles"]["sup"]["allowed_commands"] = ["ls", "/bin/sh"]
    key, _ = only(doc)
    assert key == "risk_profiles.sup.allowed_commands"


# --------------------------------------------------------------------------- all at once


def test_five_broken_rules_are_all_reported(doc: dict[str, Any]) -> None:
    doc["agents"]["Bad"] = {"enabled": False}  # alias syntax
    doc["agents"]["system"] = {"enabled": False}  # reserved
    doc["agents"]["alpha"]["model_provider"] = "offline.nope"  # dangling reference
    doc["agents"]["alpha"]["delegates"] = ["alpha"]  # self reference
    doc["agents"]["beta"]["workspace"]["path"] = "ws/alpha"  # shared workspace
    doc["deamon"] = {}  # unknown key
    found = problems(doc)
    assert set(found) == {
        "agents.Bad",
        "agents.system",
        "agents.alpha.model_provider",
        "agents.alpha.delegates[0]",
        "agents.beta.workspace.path",
        "deamon",
    }


def test_messages_are_formatted_file_key_message(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["risk_profile"] = "nope"
    with pytest.raises(ConfigError) as info:
        validate_document(doc, source="/etc/zeroclaw/zeroclaw.toml", base_dir=Path("/x"), env=ENV)
    (line,) = info.value.lines()
    assert line.startswith("/etc/zeroclaw/zeroclaw.toml: agents.alpha.risk_profile: unknown")


def test_every_nested_workspace_is_reported_once(doc: dict[str, Any]) -> None:
    for name, path in (("c1", "ws/alpha/x"), ("c2", "ws/alpha/y"), ("c3", "ws/alpha/x/deep")):
        doc["agents"][name] = {"enabled": False, "workspace": {"path": path}}
    doc["agents"]["d"] = {"enabled": False, "workspace": {"path": "ws/alphabet"}}  # not nested
    found = problems(doc)
    assert set(found) == {f"agents.{n}.workspace.path" for n in ("c1", "c2", "c3")}
    assert "agents.c1" in found["agents.c3.workspace.path"]


def test_workspace_under_its_own_forbidden_path(doc: dict[str, Any]) -> None:
    doc["agents"]["beta"]["workspace"]["path"] = "/home/op/.config/zc/beta"
    key, message = only(doc)
    assert key == "agents.beta.workspace.path"
    assert "'~/.config'" in message and "could not touch its own files" in message


def test_workspace_under_a_configured_absolute_forbidden_path(doc: dict[str, Any]) -> None:
    doc["risk_profiles"]["sup"]["forbidden_paths"] = ["/srv/zc/ws"]
    found = problems(doc)
    assert set(found) == {"agents.alpha.workspace.path", "agents.beta.workspace.path"}


# --------------------------------------------------------------------------- the daemon's own files


@pytest.mark.parametrize("key", ["state_dir", "runtime_dir"])
def test_a_workspace_may_not_contain_a_daemon_dir(doc: dict[str, Any], key: str) -> None:
    doc["daemon"][key] = "ws/alpha/inner"
    path, message = only(doc)
    assert path == "agents.alpha.workspace.path"
    assert f"contains the daemon's {key}" in message


def test_daemon_refusals_no_enabled_agent_and_config_in_a_workspace(
    doc: dict[str, Any],
) -> None:
    from zeroclaw.config import daemon_refusals

    config = validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)
    env = {**ENV, "HOOK_SECRET": "k"}  # the bound webhook's secret (its own test: channels)
    assert daemon_refusals(config, env, Path("/srv/zc/zeroclaw.toml")) == []
    inside = daemon_refusals(config, env, Path("/srv/zc/ws/beta/zeroclaw.toml"))
    assert [i.key for i in inside] == ["agents.beta.workspace.path"]
    assert "contains the config file" in inside[0].message
    for entry in doc["agents"].values():
        entry["enabled"] = False
    config = validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)
    refusals = daemon_refusals(config, ENV, Path("/srv/zc/zeroclaw.toml"))
    assert [i.key for i in refusals] == ["agents"]
    assert "no enabled agent" in refusals[0].message
    empty = validate_document({}, base_dir=Path("/srv/zc"), env=ENV)  # a truncated file
    assert [i.key for i in daemon_refusals(empty, ENV, Path("/srv/zc/z.toml"))] == ["agents"]


# --------------------------------------------------------------------------- peer_tools


def test_peer_tools_default_to_none(doc: dict[str, Any]) -> None:
    config = validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)
    assert config.agents["alpha"].peer_tools == ()


def test_peer_tools_name_known_tools(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["peer_tools"] = ["file_read", "file_reed"]
    path, message = only(doc)
    assert path == "agents.alpha.peer_tools[1]" and "'file_read'" in message
    doc["agents"]["alpha"]["peer_tools"] = ["file_read", "file_read"]
    path, message = only(doc)
    assert path == "agents.alpha.peer_tools" and "more than once: file_read" in message


def test_peer_tool_names_are_the_tools_models_see() -> None:
    import typing

    from zeroclaw.config._models import ToolName
    from zeroclaw.tools import DEFAULT_TOOLSET

    assert set(typing.get_args(ToolName)) == set(DEFAULT_TOOLSET.names())


# --------------------------------------------------------------------------- metrics token


def test_the_metrics_token_variable_may_not_be_a_provider_key(doc: dict[str, Any]) -> None:
    """Agents receive their provider's key: it cannot also be the scrape credential."""
    doc["providers"]["openai"] = {"cloud": {"model": "m", "api_key_env": "SHARED_VAR"}}
    doc["daemon"]["metrics_listen"] = "127.0.0.1:9464"
    doc["daemon"]["metrics_token_env"] = "SHARED_VAR"
    key, message = only(doc)
    assert key == "daemon.metrics_token_env" and "providers.openai.cloud" in message
    doc["daemon"]["metrics_token_env"] = "ZEROCLAW_METRICS_TOKEN"
    validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)


def test_metrics_listen_needs_a_token_variable(doc: dict[str, Any]) -> None:
    doc["daemon"]["metrics_listen"] = "127.0.0.1:9464"
    key, message = only(doc)
    assert key.startswith("daemon") and "metrics_token_env" in message


def test_listener_limits_are_bounded(doc: dict[str, Any]) -> None:
    doc["daemon"]["metrics_limits"] = {"body_timeout_secs": 0}
    key, _ = only(doc)
    assert key == "daemon.metrics_limits.body_timeout_secs"
    doc["daemon"]["metrics_limits"] = {"max_connections": 0}
    key, _ = only(doc)
    assert key == "daemon.metrics_limits.max_connections"
