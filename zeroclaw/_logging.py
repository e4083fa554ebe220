"""Logging for the daemon and agents: JSON lines for journald, readable text on a TTY.

When stderr is the journal (systemd says so in `JOURNAL_STREAM`), each JSON line starts
with its sd-daemon priority prefix (`<3>` err, `<4>` warning, `<6>` info, `<7>` debug):
journald's stream parser strips it and stores the line at that priority, so
`journalctl -p err` works; the stored message is the bare JSON line (ADR 0031).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import Literal, TextIO

# Attributes every LogRecord has; anything else was passed through `extra=` and is a field.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}

# What a log_format setting ("auto", "text", "json") resolves to for one stderr. "journal"
# is JSON with the priority prefix; the daemon resolves it once and hands it to its agents,
# which share its stderr but not its environment.
LogFormat = Literal["text", "json", "journal"]
LOG_LEVELS = ("debug", "info", "warning", "error")

# sd-daemon(3) priorities, the syslog ones.
_PRIORITIES = (
    (logging.CRITICAL, 2),
    (logging.ERROR, 3),
    (logging.WARNING, 4),
    (logging.INFO, 6),
)


def syslog_priority(levelno: int) -> int:
    """The syslog priority of a logging level: critical 2, error 3, warning 4, info 6, else
    (debug, and anything below info) 7."""
    for floor, priority in _PRIORITIES:
        if levelno >= floor:
            return priority
    return 7


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {
        k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")
    }


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        # json.dumps escapes every newline: one record is always one line.
        return json.dumps(entry, default=str)


class JournalFormatter(JsonFormatter):
    """A JSON line with its sd-daemon priority prefix, for a stderr that is the journal."""

    def format(self, record: logging.LogRecord) -> str:
        return f"<{syslog_priority(record.levelno)}>{super().format(record)}"


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        extra = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        line = f"{stamp} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if extra:
            line += f"  [{extra}]"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def stream_is_journal(stream: TextIO, env: Mapping[str, str]) -> bool:
    """Whether `stream` is connected to journald: systemd sets JOURNAL_STREAM="dev:ino" to
    the stream it gave the service, and it is ours only if our fd is that very file (a
    redirection in between makes it something else)."""
    value = env.get("JOURNAL_STREAM", "")
    dev, sep, ino = value.partition(":")
    if not sep:
        return False
    try:
        info = os.fstat(stream.fileno())
        return (info.st_dev, info.st_ino) == (int(dev), int(ino))
    except (OSError, ValueError, AttributeError):
        return False


def resolve_format(
    fmt: str, stream: TextIO | None = None, env: Mapping[str, str] | None = None
) -> LogFormat:
    """What `fmt` means on `stream` (stderr by default): "auto" is text on a TTY; JSON off
    one; JSON with priority prefixes ("journal") when the stream is the journal, whether
    asked for "auto" or "json". "journal" and "text" stand as they are."""
    stream = sys.stderr if stream is None else stream
    env = os.environ if env is None else env
    if fmt in ("text", "journal"):
        return fmt  # type: ignore[return-value]
    if fmt == "auto":
        try:
            if stream.isatty():
                return "text"
        except (ValueError, AttributeError):
            pass
    return "journal" if stream_is_journal(stream, env) else "json"


def formatter_for(fmt: LogFormat) -> logging.Formatter:
    if fmt == "text":
        return TextFormatter()
    return JournalFormatter() if fmt == "journal" else JsonFormatter()


def level_number(level: str) -> int:
    value = getattr(logging, level.upper(), logging.INFO)
    return value if isinstance(value, int) else logging.INFO


def setup_logging(fmt: str = "auto", level: str = "info") -> LogFormat:
    """Configure the root logger once for this process (daemon, or an agent after fork);
    returns the format it resolved `fmt` to."""
    resolved = resolve_format(fmt)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter_for(resolved))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level_number(level))
    return resolved
