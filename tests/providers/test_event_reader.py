"""The providers' own byte-to-event reader: lines split across any chunk boundary (mid
character included), CRLF or LF, and the body's first 200 bytes kept for errors."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from zeroclaw.providers import ProviderError
from zeroclaw.providers._http import (
    MAX_JSON_BYTES,
    SseEvent,
    _EventReader,
    _read_bounded,
    answer_whole,
    media_type,
)

BODY = 'event: a\r\ndata: h\u00e9llo\r\n\r\n: keep-alive\n\ndata: {"x": 1}\ndata: 2\n\n'.encode()


async def _events(chunks: list[bytes]) -> tuple[list[SseEvent], _EventReader]:
    seen: list[SseEvent] = []

    async def on_event(event: SseEvent) -> None:
        seen.append(event)

    reader = _EventReader(on_event)
    for chunk in chunks:
        await reader.feed(chunk)
    await reader.close()
    return seen, reader


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(BODY)])
async def test_events_come_out_whole_whatever_the_chunking(size: int) -> None:
    chunks = [BODY[i : i + size] for i in range(0, len(BODY), size)]
    seen, reader = await _events(chunks)
    assert seen == [SseEvent("a", "h\u00e9llo"), SseEvent("message", '{"x": 1}\n2')]
    assert reader.events == 2 and reader.head == BODY[:200]


async def test_a_last_event_without_its_blank_line_still_counts() -> None:
    seen, _ = await _events([b"data: end"])
    assert seen == [SseEvent("message", "end")]


async def test_only_the_first_200_bytes_are_kept() -> None:
    _, reader = await _events([b"x" * 150, b"y" * 150])
    assert reader.head == b"x" * 150 + b"y" * 50 and reader.events == 0


def test_the_media_type_is_the_content_type_without_parameters() -> None:
    assert media_type("Text/Event-Stream; charset=utf-8") == "text/event-stream"
    assert media_type("") == ""


async def test_a_whole_answer_that_is_not_json_names_its_first_bytes() -> None:
    async def never(data: object) -> None:
        raise AssertionError("not JSON: never handed on")

    with pytest.raises(ProviderError) as caught:
        await answer_whole("openai.t", "application/json", b"{" + b"z" * 400, never)
    assert str(caught.value) == (
        "provider openai.t: malformed response: neither server-sent events nor JSON "
        f"(application/json): {('{' + 'z' * 199)!r}"
    )


async def test_a_whole_answer_is_read_only_up_to_its_bound() -> None:
    """A server that answers a streamed request with a JSON document past MAX_JSON_BYTES
    is cut off at the bound with an error, not read into memory whole."""
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:  # twice the bound, then it would end
        nonlocal pulled
        for _ in range(2 * MAX_JSON_BYTES // 65536):
            pulled += 1
            yield b" " * 65536

    with pytest.raises(ProviderError, match=f"a whole answer over {MAX_JSON_BYTES} bytes"):
        await _read_bounded(b"{", endless(), "openai.t")
    assert pulled * 65536 <= MAX_JSON_BYTES + 65536
