"""The adapters a config asks for: one webhook listener per listen address (channels on one
address share it), one serial adapter per device, for the channels some agent owns (an
unowned channel would only refuse its input, so nothing listens for it)."""

from __future__ import annotations

from collections.abc import Mapping

from ..config import Config, channel_owners
from ._adapter import ChannelAdapter
from ._serial import SerialAdapter
from ._webhook import WebhookAdapter
from ._webhook_core import webhook_listeners


def channel_settings(config: Config) -> object:
    """What the adapters are built from: a reload rebuilds them only when this changed."""
    return (config.channels.webhook, config.channels.serial, channel_owners(config))


def channel_adapters(config: Config, env: Mapping[str, str]) -> list[ChannelAdapter]:
    """Every webhook and serial adapter the config describes (the CLI channel is the control
    socket's). `env` holds the webhook secrets' variables."""
    adapters: list[ChannelAdapter] = [
        WebhookAdapter(listen, channels, env)
        for listen, channels in sorted(webhook_listeners(config).items())
    ]
    owners = channel_owners(config)
    for alias, serial in sorted(config.channels.serial.items()):
        if owners.get(f"serial.{alias}"):
            adapters.append(SerialAdapter(alias, serial))
    return adapters
