"""The serial line protocol without a device: framing (any chunking of a stream gives the
same lines; an over-long line is dropped once and the next line is read), decoding with
replacement, the approval prompt and answer, and how outcomes become lines."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.channels import (
    ChannelAnswer,
    ChannelFailure,
    ChannelRefused,
    Dropped,
    LineFramer,
    approval_answer,
    approval_prompt,
    encode_lines,
    outcome_lines,
)
from zeroclaw.channels._lines import Framed


def frame(data: bytes, cuts: list[int], limit: int = 8) -> list[Framed]:
    framer = LineFramer(limit)
    out: list[Framed] = []
    last = 0
    for cut in [*sorted(set(cuts)), len(data)]:
        out.extend(framer.feed(data[last:cut]))
        last = cut
    return out


def test_lines_split_on_newline_with_or_without_cr() -> None:
    framer = LineFramer(64)
    assert framer.feed(b"one\ntwo\r\nthr") == ["one", "two"]
    assert framer.pending == 3
    assert framer.feed(b"ee\n\n") == ["three", ""]


def test_an_over_long_line_is_dropped_once_and_the_next_line_is_read() -> None:
    framer = LineFramer(16)
    assert framer.feed(b"ok\n" + b"x" * 18) == ["ok", Dropped(16)]  # 17: maybe a "\r"
    assert framer.pending == 0
    assert framer.feed(b"x" * 100_000) == []  # still the dropped line: nothing held
    assert framer.pending == 0
    assert framer.feed(b"xx\nnext\n") == ["next"]


def test_a_megabyte_without_newline_holds_at_most_the_limit() -> None:
    framer = LineFramer(4096)
    events = [e for i in range(0, 1 << 20, 1000) for e in framer.feed(b"y" * 1000)]
    assert events == [Dropped(4096)] and framer.pending == 0
    assert framer.feed(b"\nping\n") == ["ping"]


def test_the_limit_counts_the_line_without_its_newline() -> None:
    assert LineFramer(4).feed(b"abcd\nabcd\r\nabcde\nabcde\r\n") == [
        "abcd",
        "abcd",
        Dropped(4),
        Dropped(4),
    ]


def test_invalid_bytes_are_replaced() -> None:
    assert LineFramer(64).feed(b"caf\xc3\xa9 \xff\xfe ok\n") == ["café \ufffd\ufffd ok"]
    assert LineFramer(64, "latin-1").feed(b"caf\xe9\n") == ["café"]


@given(
    data=st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r", b"\r\n", b"\xff", b"\xc3\xa9"]))
    .map(b"".join)
    .filter(lambda d: len(d) < 400),
    cuts=st.lists(st.integers(0, 400), max_size=30),
    limit=st.integers(1, 12),
)
def test_any_chunking_of_a_stream_frames_the_same(data: bytes, cuts: list[int], limit: int) -> None:
    whole = frame(data, [], limit)
    assert frame(data, [c for c in cuts if c <= len(data)], limit) == whole
    # and byte by byte
    assert frame(data, list(range(len(data))), limit) == whole
    # every complete line is either delivered or reported
    assert len(whole) == data.count(b"\n") + (
        1 if (tail := data.rsplit(b"\n", 1)[-1]) and len(tail) > limit + 1 else 0
    )


def test_the_prompt_is_one_line_and_only_yes_approves() -> None:
    prompt = approval_prompt("r7", "write note.txt:\nhi  there")
    assert prompt == "approve r7? write note.txt: hi there [y/N]"
    assert all(approval_answer(a) for a in ["y", "Y", "yes", " YES \t"])
    assert not any(approval_answer(a) for a in ["", "n", "no", "yes please", "ye", "sure"])


@pytest.mark.parametrize(
    ("outcome", "lines"),
    [
        (ChannelAnswer("alpha", "line one\nline two"), ["line one", "line two"]),
        (ChannelAnswer("alpha", ""), [""]),
        (ChannelRefused("sender_ignored", "ignored\nhere"), ["error sender_ignored: ignored here"]),
        (ChannelFailure("unavailable", "agent down"), ["error unavailable: agent down"]),
        (ChannelFailure("budget_exceeded", "spent"), ["error budget_exceeded: spent"]),
    ],
)
def test_outcomes_become_lines(outcome: object, lines: list[str]) -> None:
    assert outcome_lines(outcome) == lines  # type: ignore[arg-type]


def test_lines_are_encoded_with_the_newline_and_replaced_characters() -> None:
    assert encode_lines(["a", "é"], "\r\n", "ascii") == b"a\r\n?\r\n"
    assert encode_lines(["a"], "\n", "utf-8") == b"a\n"
