"""The adapters a config asks for: one webhook listener per listen address (channels on one
address share it), one serial adapter per device. Pure but for constructing objects."""

from __future__ import annotations

from collections.abc import Mapping

from ..config import Config
from ._adapter import ChannelAdapter


def channel_settings(config: Config) -> object:
    """What the adapters are built from: a reload restarts them only when this changed."""
    return (config.channels.webhook, config.channels.serial)


def channel_adapters(config: Config, env: Mapping[str, str]) -> list[ChannelAdapter]:
    """Every webhook and serial adapter the config describes (none yet: the transports
    land next; the CLI channel is the control socket's)."""
    return []
