"""The one terminal escaping function: nothing a terminal acts on or hides gets through,
printable text is untouched, and a stream of pieces escapes like the whole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zeroclaw._terminal import terminal_safe

hostile = st.text(
    st.characters(codec=None) | st.sampled_from(["\x1b", "\x07", "\x9b", "\r", "\u202e", "\u200b"])
)


@given(hostile)
def test_nothing_a_terminal_acts_on_or_hides_gets_through(text: str) -> None:
    out = terminal_safe(text)
    assert all(ch.isprintable() or ch in "\n\t" for ch in out)


@given(hostile, hostile)
def test_pieces_escape_like_the_whole(a: str, b: str) -> None:
    assert terminal_safe(a) + terminal_safe(b) == terminal_safe(a + b)


@given(st.text(st.characters(categories=["L", "N", "P", "S"])))
def test_printable_text_is_untouched(text: str) -> None:
    assert terminal_safe(text) == text


def test_a_clipboard_write_and_hidden_text_are_shown_not_done() -> None:
    text = "ok\x1b]52;c;aGk=\x07 \u202eevil\u200b\U000e0041\r\nline\ttab é"
    assert terminal_safe(text) == (
        "ok\\x1b]52;c;aGk=\\x07 \\u202eevil\\u200b\\U000e0041\\x0d\nline\ttab é"
    )


def test_a_field_of_a_one_line_listing_keeps_no_newline_to_forge_a_row() -> None:
    forged = "write x\nap-1  alpha  webhook.ops:ci  119s left  nothing\tto see"
    assert terminal_safe(forged, one_line=True) == (
        "write x\\x0aap-1  alpha  webhook.ops:ci  119s left  nothing\\x09to see"
    )
    assert "\n" in terminal_safe(forged)  # a reply keeps its lines
