"""Channels: webhook and serial transports reaching agents through peer groups, owners and
external-peer rules (issue 13). The daemon's `ChannelHost` routes an inbound message from
the config alone and runs its turn; each adapter only speaks its transport."""

from ._adapter import ChannelAdapter, ChannelStartFailed
from ._host import APPROVAL_TIMEOUT_SECS, ChannelHost
from ._routing import Routed, route_inbound
from ._types import (
    AskApproval,
    ChannelAnswer,
    ChannelFailure,
    ChannelFailureCode,
    ChannelRefusalCode,
    ChannelRefused,
    Inbound,
    Outcome,
)
from ._webhook import WebhookAdapter
from ._webhook_core import (
    REPLAY_WINDOW_SECS,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WebhookErrorCode,
    sign,
    webhook_listeners,
)

__all__ = [
    "APPROVAL_TIMEOUT_SECS",
    "REPLAY_WINDOW_SECS",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "AskApproval",
    "ChannelAdapter",
    "ChannelAnswer",
    "ChannelFailure",
    "ChannelFailureCode",
    "ChannelHost",
    "ChannelRefusalCode",
    "ChannelRefused",
    "ChannelStartFailed",
    "Inbound",
    "Outcome",
    "Routed",
    "WebhookAdapter",
    "WebhookErrorCode",
    "route_inbound",
    "sign",
    "webhook_listeners",
]
