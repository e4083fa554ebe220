"""The safe YAML loader: plain data only, and too deep is RecursionError either way."""

from __future__ import annotations

import pytest
import yaml

from zeroclaw._yaml import safe_load


def test_plain_data_loads() -> None:
    assert safe_load("a: [1, two, {b: null}]\n") == {"a": [1, "two", {"b": None}]}


def test_python_objects_are_refused() -> None:
    with pytest.raises(yaml.YAMLError):
        safe_load("!!python/object/apply:os.system ['true']\n")


def test_too_deep_a_document_is_a_recursion_error() -> None:
    with pytest.raises(RecursionError):
        safe_load("[" * 50_000 + "]" * 50_000)
