"""Configuration: the TOML file's model, its loading and validation, and pure resolution.

Public API; the implementation lives in private modules beside this one.
"""

from ._errors import ConfigError, ConfigIssue, did_you_mean, dotted
from ._load import load_config, load_config_text, runtime_dir_hint, validate_document
from ._locate import config_candidates, locate_config, user_config_path
from ._models import (
    AgentConfig,
    AnthropicProvider,
    ChannelConfig,
    CliChannel,
    Config,
    DaemonConfig,
    OfflineProvider,
    OpenAIProvider,
    PeerGroup,
    ProviderConfig,
    RestartPolicy,
    RiskProfile,
    RuntimeProfile,
    SerialChannel,
    WebhookChannel,
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
    workspace_path,
)
from ._rules import ALIAS_SYNTAX, daemon_refusals
from ._starter import starter_document

__all__ = [
    "ALIAS_SYNTAX",
    "RESERVED_ALIASES",
    "AgentConfig",
    "AnthropicProvider",
    "ChannelConfig",
    "ChannelPeers",
    "CliChannel",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "DaemonConfig",
    "DaemonPaths",
    "EffectiveRiskPolicy",
    "ExternalPeerRule",
    "OfflineProvider",
    "OpenAIProvider",
    "PeerGroup",
    "ProviderConfig",
    "RestartPolicy",
    "RiskProfile",
    "RuntimeProfile",
    "SerialChannel",
    "WebhookChannel",
    "all_channel_peers",
    "channel_matches",
    "channel_owners",
    "channel_peers",
    "config_candidates",
    "daemon_paths",
    "daemon_refusals",
    "default_owner",
    "did_you_mean",
    "dotted",
    "effective_risk_policy",
    "load_config",
    "load_config_text",
    "locate_config",
    "normalize_peer_name",
    "runtime_dir_hint",
    "starter_document",
    "user_config_path",
    "validate_document",
    "workspace_path",
]
