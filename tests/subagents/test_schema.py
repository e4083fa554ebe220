"""Sub-agent schemas are applied with every pattern matched in linear time (RE2)."""

from __future__ import annotations

import time

import pytest

from zeroclaw._jsonschema import SchemaValidator
from zeroclaw.subagents._schema import pattern_problems


def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    validator = SchemaValidator({"type": "string", "pattern": "^(a+)+$"})
    started = time.monotonic()
    errors = list(validator.iter_errors("a" * 100_000 + "b"))
    assert len(errors) == 1 and "does not match" in errors[0].message
    # Python's re would run for longer than the universe; RE2 takes milliseconds. The bound
    # is loose on purpose: it only tells linear from exponential.
    assert time.monotonic() - started < 60


def test_pattern_properties_are_matched_by_the_same_engine() -> None:
    schema = {"type": "object", "patternProperties": {"^n_": {"type": "integer"}}}
    errors = list(SchemaValidator(schema).iter_errors({"n_a": "one", "other": "x"}))
    assert [list(e.absolute_path) for e in errors] == [["n_a"]]
    assert list(SchemaValidator(schema).iter_errors({"n_a": 1})) == []


@pytest.mark.parametrize("pattern", [r"(a)\1", r"^(?=a)a", r"(?<!x)y"])
def test_patterns_the_linear_engine_cannot_run_are_bundle_problems(pattern: str) -> None:
    schema = {"properties": {"x": {"pattern": pattern}}, "patternProperties": {"ok": {}}}
    [problem] = pattern_problems(schema)
    assert repr(pattern) in problem and "linear-time" in problem


def test_ordinary_patterns_are_no_problem() -> None:
    assert pattern_problems({"pattern": r"^[a-z0-9_-]{1,64}$", "items": [{"pattern": "x+"}]}) == []
