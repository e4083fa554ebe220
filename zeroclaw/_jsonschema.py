"""How JSON schemas (sub-agent input and output contracts) are applied: JSON Schema
2020-12 (jsonschema), with every `pattern` and `patternProperties` matched by RE2, whose
matching time is linear in the text. Top-level, so that the validation worker
(zeroclaw._schema_worker) loads it without the sub-agents package.

A schema comes with a bundle an operator may have received from elsewhere, and the text it
is matched against comes from a caller or from a runtime whose model read untrusted
material. Python's `re` backtracks (`^(a+)+$` on 50 characters runs for minutes) and holds
the GIL while it does, so neither a worker thread nor a timeout would keep the daemon
responsive (ADR 0024). A pattern RE2 cannot compile (a backreference, a lookaround) makes
the bundle fail to load.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import re2
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.protocols import Validator

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is a bundle problem line, not stderr noise


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern, _OPTIONS)


# jsonschema's keyword functions take its private validator class; they are typed `Any`
# here as jsonschema's own are.
def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _compiled(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, properties: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    assert isinstance(instance, dict)
    for pattern, subschema in properties.items():
        for key, value in instance.items():
            if _compiled(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


SchemaValidator: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties}
)


def pattern_problems(schema: object) -> list[str]:
    """The patterns of `schema` that RE2 cannot compile (each with why)."""
    problems: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, dict):
            patterns = []
            if isinstance(node.get("pattern"), str):
                patterns.append(node["pattern"])
            if isinstance(node.get("patternProperties"), dict):
                patterns.extend(node["patternProperties"])
            for pattern in patterns:
                try:
                    _compiled(pattern)
                except re2.error as exc:
                    problems.append(
                        f"pattern {pattern!r} is not supported by the linear-time engine "
                        f"(RE2: {exc}); backreferences and lookarounds are not allowed"
                    )
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    return problems
