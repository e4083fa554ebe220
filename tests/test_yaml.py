"""The safe YAML loader: plain data only, its errors as YamlError (with the line), too deep
is RecursionError either way; PyYAML loads at the first document, not with the module."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zeroclaw._yaml import YamlError, safe_load


def test_plain_data_loads() -> None:
    assert safe_load("a: [1, two, {b: null}]\n") == {"a": [1, "two", {"b": None}]}


def test_python_objects_are_refused() -> None:
    with pytest.raises(YamlError):
        safe_load("!!python/object/apply:os.system ['true']\n")


def test_a_syntax_error_names_its_line() -> None:
    with pytest.raises(YamlError) as info:
        safe_load("a: 1\nb: [2\nc: 3\n")
    assert info.value.line is not None and info.value.line >= 1


def test_pyyaml_loads_with_the_first_document_only() -> None:
    code = (
        "import sys; from zeroclaw._yaml import safe_load; before = 'yaml' in sys.modules; "
        "safe_load('a: 1'); print(before, 'yaml' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_too_deep_a_document_is_a_recursion_error() -> None:
    with pytest.raises(RecursionError):
        safe_load("[" * 50_000 + "]" * 50_000)
