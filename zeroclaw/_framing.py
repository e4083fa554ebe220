"""Length-prefixed frames: a 4-byte big-endian length, then that many bytes. Sans-IO.

Shared by the control socket (operator CLI <-> daemon) and each agent's link (daemon <->
agent), so it belongs to neither: agent processes frame their link without loading the
control package.
"""

from __future__ import annotations

import struct

HEADER = struct.Struct(">I")


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the {limit}-byte limit")
        self.size = size
        self.limit = limit


def encode_frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


class FrameDecoder:
    """Feed bytes in any chunking; get whole frames out. Refuses oversized lengths early,
    before buffering them, so a hostile peer cannot make us allocate."""

    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        self._buf += data
        frames = []
        while len(self._buf) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buf)
            if size > self.max_frame:
                raise FrameTooLarge(size, self.max_frame)
            end = HEADER.size + size
            if len(self._buf) < end:
                break
            frames.append(bytes(self._buf[HEADER.size : end]))
            del self._buf[:end]
        return frames

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back (non-zero at EOF means a truncated frame)."""
        return len(self._buf)
