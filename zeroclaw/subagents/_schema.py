"""How sub-agent schemas are applied: zeroclaw._jsonschema (top-level, so that the
validation worker process loads it without this package).

jsonschema loads at the first schema checked, not with this package: a daemon with no
sub-agent bundle never imports it (ADR 0067)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from .._schema_check import Invalid, Valid


def json_pointer(path: Iterable[object]) -> str:
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else ""


def check_instance(schema: Mapping[str, object], instance: object) -> Valid | Invalid:
    """`instance` against `schema` in this process (when no validation worker answered):
    Valid, or jsonschema's best match among the errors."""
    from jsonschema.exceptions import best_match

    from .._jsonschema import SchemaValidator

    error = best_match(SchemaValidator(schema).iter_errors(cast(Any, instance)))
    return Valid() if error is None else Invalid(error.message, json_pointer(error.absolute_path))


def meta_schema_problem(schema: Mapping[str, object] | bool) -> str | None:
    """Why `schema` is not a JSON Schema 2020-12, or None."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return exc.message
    return None


def pattern_problems(schema: object) -> list[str]:
    """The patterns of `schema` that RE2 cannot compile (each with why)."""
    from .._jsonschema import pattern_problems as problems

    return problems(schema)

