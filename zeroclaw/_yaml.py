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
