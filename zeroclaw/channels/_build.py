"""The adapters a config asks for: one webhook listener per listen address (channels on one
address share it), one serial adapter per device, one Telegram adapter per bot, one Matrix
adapter per account, for the channels some agent owns (an unowned channel would only
refuse its input, so nothing listens for it)."""

from __future__ import annotations

from collections.abc import Mapping

from ..config import Config, channel_owners, daemon_paths
from ._adapter import ChannelAdapter
from ._webhook_core import webhook_listeners


def channel_settings(config: Config) -> object:
    """What the adapters are built from: a reload rebuilds them only when this changed."""
    channels = config.channels
    return (
        channels.webhook,
        channels.serial,
        channels.telegram,
        channels.matrix,
        channel_owners(config),
    )


def channel_adapters(config: Config, env: Mapping[str, str]) -> list[ChannelAdapter]:
    """Every webhook and serial adapter the config describes (the CLI channel is the control
    socket's). `env` holds the webhook secrets', the bot tokens' and the Matrix credentials'
    variables."""
    # Each transport's module (hypercorn; trio-asyncio and pyserial) loads only when the
    # config has a channel of its kind: a daemon without one starts without them.
    adapters: list[ChannelAdapter] = []
    listeners = webhook_listeners(config)
    if listeners:
        from ._webhook import WebhookAdapter

        for listen, channels in sorted(listeners.items()):
            adapters.append(WebhookAdapter(listen, channels, env))
    owners = channel_owners(config)
    owned = [(a, s) for a, s in sorted(config.channels.serial.items()) if owners.get(f"serial.{a}")]
    if owned:
        from ._serial import SerialAdapter

        for alias, serial in owned:
            adapters.append(SerialAdapter(alias, serial))
    bots = [
        (a, t) for a, t in sorted(config.channels.telegram.items()) if owners.get(f"telegram.{a}")
    ]
    if bots:
        from ._telegram import TelegramAdapter

        state_dir = daemon_paths(config, env).state_dir
        for alias, bot in bots:
            # The daemon refused to start without the token (config rules); a reload that
            # binds a bot whose variable is not set gets an adapter that fails, shown so.
            token = env.get(bot.token_env, "")
            adapters.append(TelegramAdapter(alias, bot, token, state_dir))
    accounts = [
        (a, m) for a, m in sorted(config.channels.matrix.items()) if owners.get(f"matrix.{a}")
    ]
    if accounts:
        from ._matrix import MatrixAdapter

        state_dir = daemon_paths(config, env).state_dir
        for alias, account in accounts:
            adapters.append(MatrixAdapter(alias, account, env, state_dir))
    return adapters
