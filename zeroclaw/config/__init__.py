"""Configuration: the TOML file's model, its loading and validation, and pure resolution.

Public API; the implementation lives in private modules beside this one. Finding the file
(`_locate`) and the errors are loaded at once; the light read (`_light`, tomllib), the
pydantic models and everything built on them on first use, so a one-shot command through
the daemon never imports pydantic (ADR 0035).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._budgets import BudgetForm, BudgetKey, parse_budget_key
from ._errors import ConfigError, ConfigIssue, did_you_mean, dotted
from ._locate import (
    SYSTEM_CONFIG,
    config_candidates,
    locate_config,
    system_dir_defaults,
    user_config_path,
)

if TYPE_CHECKING:
    from ._endpoints import (
        endpoint_allowed,
        endpoint_key,
    )
    from ._light import LightConfig, daemon_dirs, light_config, read_light_config
    from ._load import (
        load_config,
        load_config_text,
        runtime_dir_hint,
        validate_document,
    )
    from ._models import (
        MCP_TOOL_PREFIX,
        AgentBudget,
        AgentConfig,
        AnthropicProvider,
        BudgetLimits,
        ChannelConfig,
        CliChannel,
        Config,
        DaemonConfig,
        DiscoveryConfig,
        DiscoveryOverride,
        HttpLimits,
        McpServerConfig,
        OfflineProvider,
        OpenAIProvider,
        PeerGroup,
        Price,
        ProviderConfig,
        RestartPolicy,
        RiskProfile,
        RuntimeProfile,
        SerialChannel,
        SkillsConfig,
        SubagentsConfig,
        WebhookChannel,
        mcp_tool_name,
    )
    from ._resolve import (
        RESERVED_ALIASES,
        ChannelPeers,
        DaemonPaths,
        EffectiveRiskPolicy,
        ExternalPeerRule,
        all_channel_peers,
        channel_matches,
        channel_owners,
        channel_peers,
        daemon_paths,
        default_owner,
        effective_risk_policy,
        normalize_peer_name,
        readonly_agents,
        skills_dirs,
        subagents_dir,
        workspace_path,
    )
    from ._rules import (
        ALIAS_SYNTAX,
        daemon_refusals,
    )
    from ._starter import (
        starter_document,
    )

# Not `_load`: importing the submodule `._load` would replace a function of that name.
_lazily = lazy_attributes(
    __name__,
    {
        "ALIAS_SYNTAX": "._rules",
        "AgentBudget": "._models",
        "AgentConfig": "._models",
        "BudgetLimits": "._models",
        "Price": "._models",
        "LightConfig": "._light",
        "daemon_dirs": "._light",
        "light_config": "._light",
        "read_light_config": "._light",
        "AnthropicProvider": "._models",
        "ChannelConfig": "._models",
        "ChannelPeers": "._resolve",
        "CliChannel": "._models",
        "Config": "._models",
        "DaemonConfig": "._models",
        "DaemonPaths": "._resolve",
        "DiscoveryConfig": "._models",
        "DiscoveryOverride": "._models",
        "HttpLimits": "._models",
        "MCP_TOOL_PREFIX": "._models",
        "McpServerConfig": "._models",
        "mcp_tool_name": "._models",
        "EffectiveRiskPolicy": "._resolve",
        "ExternalPeerRule": "._resolve",
        "OfflineProvider": "._models",
        "OpenAIProvider": "._models",
        "PeerGroup": "._models",
        "ProviderConfig": "._models",
        "RESERVED_ALIASES": "._resolve",
        "RestartPolicy": "._models",
        "RiskProfile": "._models",
        "RuntimeProfile": "._models",
        "SerialChannel": "._models",
        "SkillsConfig": "._models",
        "SubagentsConfig": "._models",
        "WebhookChannel": "._models",
        "all_channel_peers": "._resolve",
        "channel_matches": "._resolve",
        "channel_owners": "._resolve",
        "channel_peers": "._resolve",
        "daemon_paths": "._resolve",
        "daemon_refusals": "._rules",
        "default_owner": "._resolve",
        "effective_risk_policy": "._resolve",
        "endpoint_allowed": "._endpoints",
        "endpoint_key": "._endpoints",
        "load_config": "._load",
        "load_config_text": "._load",
        "normalize_peer_name": "._resolve",
        "readonly_agents": "._resolve",
        "runtime_dir_hint": "._load",
        "skills_dirs": "._resolve",
        "starter_document": "._starter",
        "subagents_dir": "._resolve",
        "validate_document": "._load",
        "workspace_path": "._resolve",
    },
)


def __getattr__(name: str) -> object:
    return _lazily(name, globals())


__all__ = [
    "ALIAS_SYNTAX",
    "MCP_TOOL_PREFIX",
    "RESERVED_ALIASES",
    "SYSTEM_CONFIG",
    "AgentBudget",
    "AgentConfig",
    "AnthropicProvider",
    "BudgetForm",
    "BudgetKey",
    "BudgetLimits",
    "ChannelConfig",
    "ChannelPeers",
    "CliChannel",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "DaemonConfig",
    "DaemonPaths",
    "DiscoveryConfig",
    "DiscoveryOverride",
    "EffectiveRiskPolicy",
    "ExternalPeerRule",
    "HttpLimits",
    "LightConfig",
    "McpServerConfig",
    "OfflineProvider",
    "OpenAIProvider",
    "PeerGroup",
    "Price",
    "ProviderConfig",
    "RestartPolicy",
    "RiskProfile",
    "RuntimeProfile",
    "SerialChannel",
    "SkillsConfig",
    "SubagentsConfig",
    "WebhookChannel",
    "all_channel_peers",
    "channel_matches",
    "channel_owners",
    "channel_peers",
    "config_candidates",
    "daemon_dirs",
    "daemon_paths",
    "daemon_refusals",
    "default_owner",
    "did_you_mean",
    "dotted",
    "effective_risk_policy",
    "endpoint_allowed",
    "endpoint_key",
    "light_config",
    "load_config",
    "load_config_text",
    "locate_config",
    "mcp_tool_name",
    "normalize_peer_name",
    "parse_budget_key",
    "read_light_config",
    "readonly_agents",
    "runtime_dir_hint",
    "skills_dirs",
    "starter_document",
    "subagents_dir",
    "system_dir_defaults",
    "user_config_path",
    "validate_document",
    "workspace_path",
]
