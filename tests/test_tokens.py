"""The one token estimate (zeroclaw._tokens): high rather than low, and a cut that fits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zeroclaw._tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    cut_to_tokens,
    estimate_tokens,
    message_tokens,
)


def test_ascii_is_a_token_per_four_characters_rounded_up() -> None:
    assert [estimate_tokens("x" * n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]
    assert message_tokens("") == MESSAGE_OVERHEAD_TOKENS


def test_other_characters_count_one_each() -> None:
    assert estimate_tokens("日本語") == 3
    assert estimate_tokens("ab日本") == 1 + 2
    assert estimate_tokens("🙂🙂") == 2


@given(st.text(), st.integers(0, 200))
def test_a_cut_is_a_start_of_the_text_within_its_tokens(text: str, tokens: int) -> None:
    cut = cut_to_tokens(text, tokens)
    assert text.startswith(cut)
    assert estimate_tokens(cut) <= tokens
    if cut != text:  # the longest such start: one character more is over
        assert estimate_tokens(text[: len(cut) + 1]) > tokens


@given(st.text(), st.text())
def test_the_estimate_never_shrinks_when_text_is_added(a: str, b: str) -> None:
    assert estimate_tokens(a + b) >= max(estimate_tokens(a), estimate_tokens(b))
