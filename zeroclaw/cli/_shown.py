"""Outside text (a sender's words, what a model wrote) as the terminal may print it."""

from __future__ import annotations


def shown(text: str) -> str:
    """Control characters (ESC, OSC, BEL, ...) escaped, so outside text cannot write to the
    operator's terminal (an OSC 52 clipboard write, hidden text)."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
