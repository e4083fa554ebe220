"""A serial channel's line protocol, without I/O: bytes in -> complete lines (an over-long
line dropped with a diagnostic, resynchronised at the next newline; undecodable bytes
replaced), an outcome -> the lines written back, and the approval prompt and its answer.

Input lines end with "\\n"; a "\\r" right before it is dropped, so a device that sends
"\\r\\n" frames the same. Output lines end with the channel's configured newline.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._types import ChannelAnswer, ChannelFailure, ChannelRefused, Outcome

MAX_LINE_BYTES = 4096


@dataclass(frozen=True)
class Dropped:
    """An input line longer than the limit: its bytes were discarded up to the next newline."""

    limit: int

    @property
    def detail(self) -> str:
        return f"dropped an input line over {self.limit} bytes"


Framed = str | Dropped


class LineFramer:
    """Splits a byte stream into lines. What it yields depends on the bytes only, never on
    how they were chunked. It never holds more than `max_line_bytes` + 1 bytes: a line that
    grows past that is reported once, as soon as it does, and skipped to its newline."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES, encoding: str = "utf-8") -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self.max_line_bytes = max_line_bytes
        self.encoding = encoding
        self._buf = bytearray()
        self._discarding = False  # inside a dropped line, until its newline

    def feed(self, data: bytes) -> list[Framed]:
        out: list[Framed] = []
        # +1: room for the "\r" of a "\r\n" line that is exactly at the limit
        room = self.max_line_bytes + 1
        start = 0
        while start <= len(data):
            nl = data.find(b"\n", start)
            end = len(data) if nl < 0 else nl
            if self._discarding:
                if nl < 0:
                    break
                self._discarding = False
            elif len(self._buf) + (end - start) > room:
                out.append(Dropped(self.max_line_bytes))
                self._buf.clear()
                self._discarding = nl < 0  # else: the newline is here, the next line starts
            else:
                self._buf += data[start:end]
                if nl < 0:
                    break
                line = bytes(self._buf)
                self._buf.clear()
                if line.endswith(b"\r"):
                    line = line[:-1]
                if len(line) > self.max_line_bytes:
                    out.append(Dropped(self.max_line_bytes))
                else:
                    out.append(line.decode(self.encoding, errors="replace"))
            start = end + 1
        return out

    @property
    def pending(self) -> int:
        """Bytes held of a line whose newline has not come yet."""
        return len(self._buf)


def one_line(text: str) -> str:
    """`text` flattened to one line (a prompt must not be mistaken for several)."""
    return " ".join(text.split())


def approval_prompt(rid: str, what: str) -> str:
    return f"approve {rid}? {one_line(what)} [y/N]"


def approval_answer(line: str) -> bool:
    """The line after a prompt: yes only when it says so; anything else is a no."""
    return line.strip().lower() in ("y", "yes")


def error_line(code: str, detail: str) -> str:
    return f"error {code}: {one_line(detail)}"


def outcome_lines(outcome: Outcome) -> list[str]:
    """What the device reads back for one message: the reply's lines, or one error line
    with the stable code (the README's error table)."""
    if isinstance(outcome, ChannelAnswer):
        lines = outcome.reply.splitlines()
        return lines or [""]
    if isinstance(outcome, ChannelRefused | ChannelFailure):
        return [error_line(outcome.code, outcome.detail)]
    raise AssertionError(outcome)


def encode_lines(lines: list[str], newline: str, encoding: str) -> bytes:
    """The lines as one write: each with the newline, unencodable characters replaced."""
    return "".join(line + newline for line in lines).encode(encoding, errors="replace")
