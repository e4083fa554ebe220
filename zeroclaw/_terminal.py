"""Text from outside the operator (a model's reply, a webhook sender's message, a record
an agent stored) as the operator's terminal may show it: the one escaping function every
CLI output of such text goes through.

Everything a terminal would act on or hide is shown as a visible escape instead: C0 and C1
controls (ESC, so no OSC 52 clipboard write, no cursor or title sequence; CR, so no line
is overwritten), DEL, and the invisible or reordering characters (zero-width, bidi
overrides, tag characters, line separators, unassigned code points). Newlines and tabs
stay, so a reply keeps its lines, except in a field of a one-line listing (`one_line`),
where a newline would forge a row of its own. Stateless per character, so a stream of pieces (a
reply's deltas) is escaped piece by piece with the same result as the whole.
"""

from __future__ import annotations

KEPT = frozenset("\n\t")


def _escaped(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def terminal_safe(text: str, *, one_line: bool = False) -> str:
    """`text` with every character a terminal would act on, or not show, escaped; with
    `one_line`, newlines and tabs too."""
    if text.isprintable():
        return text
    kept = frozenset() if one_line else KEPT
    return "".join(ch if ch.isprintable() or ch in kept else _escaped(ch) for ch in text)
