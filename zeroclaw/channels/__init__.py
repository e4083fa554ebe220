"""Channels: webhook, serial, Telegram and Matrix transports reaching agents through peer
groups, owners and external-peer rules (issues 13, 30). The daemon's `ChannelHost` routes an
inbound message from the config alone and runs its turn; each adapter only speaks its
transport. The adapters load on first use: hypercorn, trio-asyncio, the Bot API client or
matrix-nio only for a daemon that has such a channel (ADR 0036, 0066)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._adapter import ChannelAdapter, ChannelStartFailed
from ._build import channel_adapters, channel_settings
from ._host import APPROVAL_TIMEOUT_SECS, ChannelHost
from ._lines import (
    MAX_LINE_BYTES,
    Dropped,
    LineFramer,
    approval_answer,
    approval_prompt,
    encode_lines,
    outcome_lines,
)
from ._routing import Routed, route_inbound
from ._supervise import AdapterRecord, AdapterState, ChannelSupervisor, retry_delay
from ._types import (
    BUDGET_RETRY_SECS,
    AskApproval,
    ChannelAnswer,
    ChannelFailure,
    ChannelFailureCode,
    ChannelRefusalCode,
    ChannelRefused,
    Inbound,
    OnDelta,
    Outcome,
    Scheduled,
)
from ._webhook_core import (
    REPLAY_WINDOW_SECS,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    RateLimiter,
    WebhookErrorCode,
    sign,
    webhook_listeners,
)

if TYPE_CHECKING:
    from ._matrix import MatrixAdapter
    from ._serial import SerialAdapter
    from ._telegram import TelegramAdapter
    from ._webhook import WebhookAdapter

_lazily = lazy_attributes(
    __name__,
    {
        "MatrixAdapter": "._matrix",
        "SerialAdapter": "._serial",
        "TelegramAdapter": "._telegram",
        "WebhookAdapter": "._webhook",
    },
)


def __getattr__(name: str) -> object:
    return _lazily(name, globals())


__all__ = [
    "APPROVAL_TIMEOUT_SECS",
    "BUDGET_RETRY_SECS",
    "MAX_LINE_BYTES",
    "REPLAY_WINDOW_SECS",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "AdapterRecord",
    "AdapterState",
    "AskApproval",
    "ChannelAdapter",
    "ChannelAnswer",
    "ChannelFailure",
    "ChannelFailureCode",
    "ChannelHost",
    "ChannelRefusalCode",
    "ChannelRefused",
    "ChannelStartFailed",
    "ChannelSupervisor",
    "Dropped",
    "Inbound",
    "LineFramer",
    "MatrixAdapter",
    "OnDelta",
    "Outcome",
    "RateLimiter",
    "Routed",
    "Scheduled",
    "SerialAdapter",
    "TelegramAdapter",
    "WebhookAdapter",
    "WebhookErrorCode",
    "approval_answer",
    "approval_prompt",
    "channel_adapters",
    "channel_settings",
    "encode_lines",
    "outcome_lines",
    "retry_delay",
    "route_inbound",
    "sign",
    "webhook_listeners",
]
