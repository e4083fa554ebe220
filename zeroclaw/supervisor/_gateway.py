"""The gateway in the daemon (issue 29): built as one more channel adapter when `[gateway]`
is configured, so the channel supervisor starts it, reports it in `status`, retries it with
backoff when it cannot bind, and rebuilds it when a reload changes it. The gateway package
(hypercorn, the pages) is imported only then: a daemon without a gateway never loads it."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..channels import ChannelAdapter
from ..config import Config
from ..control import CommandTable
from ..events import EventSink
from ._running import Running


def gateway_adapters(
    running: Running, table: CommandTable, events: EventSink, env: Mapping[str, str]
) -> Callable[[Config], list[ChannelAdapter]]:
    """The adapters of a config's gateway: none, or the one listener."""

    def build(config: Config) -> list[ChannelAdapter]:
        if config.gateway is None:
            return []
        from ..gateway import Gateway, table_operator

        return [Gateway(lambda: running.config.gateway, env, table_operator(table), events)]

    return build
