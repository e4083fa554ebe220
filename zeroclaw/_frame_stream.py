"""Reading length-prefixed frames from a trio stream (the control socket, an agent's link)."""

from __future__ import annotations

import trio

from ._framing import FrameDecoder

RECEIVE_SIZE = 65536


async def receive_frames(
    stream: trio.abc.ReceiveStream, decoder: FrameDecoder
) -> list[bytes] | None:
    """The next whole frames (at least one), or None once the stream has ended or broken.
    Raises FrameTooLarge as the decoder does."""
    while True:
        try:
            data = await stream.receive_some(RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return None
        if not data:
            return None  # closed, or half-closed: nothing more will come
        frames = decoder.feed(data)
        if frames:
            return frames
