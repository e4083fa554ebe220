"""How many tokens a text costs a model, estimated the same way everywhere. Pure.

One estimate for every budget that counts tokens without a tokenizer (the history and
recall budgets of a turn, ADR 0059; usage accounting may reuse it for a provider that
reports none): exact counts need the model's own tokenizer, which zeroclaw does not ship
and a provider may not name. The rule errs on the high side, so a budget it fills is
rarely over-run by the model's real count:

- ASCII text: one token per 4 characters, rounded up (English averages 4 to 4.5
  characters per token in GPT-style and Claude tokenizers);
- every other character: one token (CJK and emoji are 1 to 2 tokens each; accented Latin
  letters often share a token, so they are over-counted, which is the safe side).

A message's framing (role, separators) is `MESSAGE_OVERHEAD_TOKENS` more.
"""

from __future__ import annotations

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4  # a chat message's role and separators, whatever its text


def estimate_tokens(text: str) -> int:
    """Tokens `text` costs, estimated (0 for an empty text)."""
    if text.isascii():
        return -(-len(text) // CHARS_PER_TOKEN)
    ascii_chars = len(text.encode("ascii", "ignore"))
    return -(-ascii_chars // CHARS_PER_TOKEN) + len(text) - ascii_chars


def message_tokens(text: str) -> int:
    """Tokens one chat message of `text` costs, its framing included."""
    return estimate_tokens(text) + MESSAGE_OVERHEAD_TOKENS


def cut_to_tokens(text: str, tokens: int) -> str:
    """The longest start of `text` whose estimate is at most `tokens`."""
    if estimate_tokens(text) <= tokens:
        return text
    if text.isascii():
        return text[: max(tokens, 0) * CHARS_PER_TOKEN]
    # In quarter tokens: an ASCII character costs 1, any other CHARS_PER_TOKEN.
    budget, spent = max(tokens, 0) * CHARS_PER_TOKEN, 0
    for index, char in enumerate(text):
        spent += 1 if char < "\x80" else CHARS_PER_TOKEN
        if spent > budget:
            return text[:index]
    return text
