"""What a provider is built with: one struct per kind, tagged on `kind`.

Sent to agent processes inside `AgentSpec` (msgpack, zygote-safe: no pydantic here); the
supervisor builds it from the validated config, so every field is already checked.
"""

from __future__ import annotations

import msgspec


class _ProviderSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind"):
    pass


class OfflineSpec(_ProviderSpec, tag="offline", frozen=True):
    """The built-in deterministic provider: no settings."""


class OpenAISpec(_ProviderSpec, tag="openai", frozen=True):
    base_url: str
    model: str
    api_key_env: str | None
    timeout_secs: float
    max_retries: int
    answer_timeout_secs: float = 600.0  # the whole request, retries included
    stream_usage: bool = True  # ask for usage in a streamed answer (stream_options)
    breaker_failures: int = 3  # in a chain: consecutive failures before it is skipped
    breaker_open_secs: float = 30.0  # ... and for how long at first


class AnthropicSpec(_ProviderSpec, tag="anthropic", frozen=True):
    base_url: str
    model: str
    api_key_env: str
    max_tokens: int
    timeout_secs: float
    max_retries: int
    answer_timeout_secs: float = 600.0
    breaker_failures: int = 3
    breaker_open_secs: float = 30.0


ProviderSpec = OfflineSpec | OpenAISpec | AnthropicSpec


class NamedProvider(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One provider of an agent's fallback chain: its reference and its settings."""

    name: str  # "kind.alias"
    config: ProviderSpec
