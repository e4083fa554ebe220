"""YAML the safe way, with libyaml's C parser when PyYAML has it (several times faster than
the pure-Python one, same safe constructor: plain data only, no Python objects)."""

from __future__ import annotations

from typing import Any

import yaml

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str | bytes) -> Any:
    """Like `yaml.safe_load`. Too deep a document raises RecursionError with either parser
    (libyaml stops at its own nesting limit with a YAMLError; callers handle one case)."""
    try:
        return yaml.load(text, Loader=_Loader)  # a safe loader, C or Python
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):
            raise RecursionError("nested too deeply") from None
        raise


def front_matter_text(text: str) -> str | None:
    """The YAML between the leading `---` line of a Markdown file (a SKILL.md) and the next
    `---` line, or None when the text does not start so."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    return None if end is None else "\n".join(lines[1:end])
