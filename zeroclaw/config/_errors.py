"""The one error type config loading raises, with keyed, operator-readable messages."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

KeyPath = tuple[str | int, ...]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def dotted(path: KeyPath) -> str:
    """`("agents", "alpha", "channels", 1)` → `agents.alpha.channels[1]`; odd keys are quoted."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        key = part if _BARE_KEY.match(part) else json.dumps(part, ensure_ascii=False)
        out = f"{out}.{key}" if out else key
    return out or "<root>"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A ' (did you mean 'x'?)' suffix, or '' when nothing is close."""
    close = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem in a config file, anchored at a dotted key path or a line/column."""

    path: KeyPath
    message: str
    line: int | None = None
    column: int | None = None
    code: str | None = None  # a stable reason code, where the check has one (a skill's)

    @property
    def key(self) -> str:
        return dotted(self.path)

    def format(self, source: str) -> str:
        if self.line is not None:
            return f"{source}:{self.line}:{self.column or 1}: {self.message}"
        return f"{source}: {self.key}: {self.message}"

    def as_json(self) -> dict[str, object]:
        data: dict[str, object] = {"path": self.key, "message": self.message}
        if self.line is not None:
            data["line"] = self.line
            data["column"] = self.column
        if self.code is not None:
            data["code"] = self.code
        return data


class ConfigError(Exception):
    """The config file is missing, unreadable, not TOML, or breaks validation rules."""

    def __init__(self, source: str, issues: Sequence[ConfigIssue]) -> None:
        if not issues:
            raise ValueError("ConfigError needs at least one issue")
        self.source = source
        self.issues = tuple(issues)
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        return [issue.format(self.source) for issue in self.issues]
