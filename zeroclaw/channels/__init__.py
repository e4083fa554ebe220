"""Channels: webhook and serial transports reaching agents through peer groups, owners and
external-peer rules (issue 13). The daemon's `ChannelHost` routes an inbound message from
the config alone and runs its turn; each adapter only speaks its transport."""

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
from ._serial import SerialAdapter
from ._supervise import AdapterRecord, AdapterState, ChannelSupervisor, retry_delay
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
    "Outcome",
    "Routed",
    "SerialAdapter",
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
