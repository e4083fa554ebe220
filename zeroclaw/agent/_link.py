"""The private link between the daemon and one agent process (an inherited socketpair).

Agent → daemon: Ready once it is up; Pong for each Ping. The daemon closing the link
means "stop". Framed like the control socket: 4-byte length, then msgpack.
"""

from __future__ import annotations

import msgspec

MAX_LINK_FRAME = 1024 * 1024


class Ready(msgspec.Struct, tag="ready", frozen=True):
    pid: int


class Ping(msgspec.Struct, tag="ping", frozen=True):
    seq: int


class Pong(msgspec.Struct, tag="pong", frozen=True):
    seq: int


LinkMessage = Ready | Ping | Pong

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(LinkMessage)


def encode_link(message: LinkMessage) -> bytes:
    return _encoder.encode(message)


def decode_link(payload: bytes) -> LinkMessage:
    return _decoder.decode(payload)
