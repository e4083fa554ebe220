"""YAML the safe way, with libyaml's C parser when PyYAML has it (several times faster than
the pure-Python one, same safe constructor: plain data only, no Python objects).

PyYAML loads at the first document read, not with the modules that may read one: a daemon
with no manifest, bundle or skill to read never imports it (ADR 0067). Its errors come out
as `YamlError`, which callers can catch without PyYAML loaded."""

from __future__ import annotations

from typing import Any


class YamlError(ValueError):
    """A document PyYAML could not read: its message, and the 0-based line of the problem
    when it names one."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def safe_load(text: str | bytes) -> Any:
    """Like `yaml.safe_load`, raising YamlError instead of yaml.YAMLError. Too deep a
    document raises RecursionError with either parser (libyaml stops at its own nesting
    limit with a YAMLError; callers handle one case)."""
    import yaml

    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # a safe loader, C or Python
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):
            raise RecursionError("nested too deeply") from None
        mark = getattr(exc, "problem_mark", None)
        raise YamlError(str(exc), None if mark is None else mark.line) from exc


def front_matter_text(text: str) -> str | None:
    """The YAML between the leading `---` line of a Markdown file (a SKILL.md) and the next
    `---` line, or None when the text does not start so."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    return None if end is None else "\n".join(lines[1:end])
