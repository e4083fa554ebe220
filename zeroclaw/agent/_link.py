"""The private link between the daemon and one agent process (an inherited socketpair).

Daemon → agent: Keys first (this start's bus credentials: never argv, never environment),
then Ping, Neighbours and ProbeCommand. Agent → daemon: Pong, ProbeResult, Busy (its count
of running turns changed: an on-demand agent is never idle-stopped mid-turn) and Fatal (why
it cannot start, written just before it exits with EX_CONFIG). The daemon closing the link
means "stop". Framed by the neutral `zeroclaw._framing` (as the control socket is): 4-byte
length, then msgpack.
"""

from __future__ import annotations

import msgspec

from .._decode import decode_msgpack

MAX_LINK_FRAME = 1024 * 1024


class Keys(msgspec.Struct, tag="keys", frozen=True):
    endpoint: str
    server_public: bytes
    public: bytes
    secret: bytes
    max_frame: int


class Ping(msgspec.Struct, tag="ping", frozen=True):
    seq: int


class Pong(msgspec.Struct, tag="pong", frozen=True):
    seq: int


class Neighbours(msgspec.Struct, tag="neighbours", frozen=True):
    """Every other agent's workspace, after a reload changed them (refused even to full)."""

    workspaces: tuple[str, ...]


class ProbeCommand(msgspec.Struct, tag="probe", frozen=True):
    seq: int
    to: str
    channel: str


class ProbeResult(msgspec.Struct, tag="probe_result", frozen=True):
    seq: int
    outcome: str  # "delivered" or a refusal code
    detail: str
    rtt_ms: float


class Busy(msgspec.Struct, tag="busy", frozen=True):
    turns: int


class Fatal(msgspec.Struct, tag="fatal", frozen=True):
    reason: str


LinkMessage = Keys | Ping | Pong | Neighbours | ProbeCommand | ProbeResult | Busy | Fatal

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(LinkMessage)


def encode_link(message: LinkMessage) -> bytes:
    return _encoder.encode(message)


def decode_link(payload: bytes) -> LinkMessage:
    """Raises DecodeFailure on anything that is not a link message (ADR 0014)."""
    return decode_msgpack(_decoder, payload, max_bytes=MAX_LINK_FRAME)
