"""How sub-agent schemas are applied: zeroclaw._jsonschema (top-level, so that the
validation worker process loads it without this package)."""

from __future__ import annotations

from .._jsonschema import SchemaValidator, pattern_problems

__all__ = ["SchemaValidator", "pattern_problems"]
