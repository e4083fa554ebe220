"""Every operator-facing error code set, gathered in one place (docs/reference/error-codes.md
shows them: tests/docs/test_reference.py)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import get_args

from zeroclaw._error_codes import families

REPO = Path(__file__).resolve().parent.parent


def test_every_family_is_a_nonempty_set_of_snake_case_codes() -> None:
    found = families()
    assert set(found) == {
        "bus",
        "tool",
        "memory",
        "control",
        "dispatch",
        "channel",
        "webhook",
        "gateway",
        "discovery",
        "discovery_diagnostic",
        "skill",
        "cli",
        "decode",
    }
    for family in found.values():
        assert family.codes and len(set(family.codes)) == len(family.codes), family.title
        assert all(code.isidentifier() and code.islower() for code in family.codes)


def test_every_code_the_memory_service_raises_is_in_its_family() -> None:
    """The memory codes are a Literal the service's error takes; the family is that set."""
    from zeroclaw.memory import MEMORY_ERROR_CODES, MemoryErrorCode

    assert families()["memory"].codes == get_args(MemoryErrorCode) == MEMORY_ERROR_CODES


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A source file parsed once for the whole module's walks (~600 files)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _codes_in_source(call_names: set[str]) -> set[tuple[str, str]]:
    """(file, code) for every string-literal code given to these calls in the package: the
    first positional argument, or the `error=` keyword."""
    found: set[tuple[str, str]] = set()
    for path in (REPO / "zeroclaw").rglob("*.py"):
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in call_names:
                continue
            args = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "error")]
            for arg in args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.add((path.name, arg.value))
    return found


def test_every_code_the_control_socket_answers_is_listed() -> None:
    """Until `error_reply` takes the Literal (and mypy checks it), the source is read."""
    found = families()
    families_answered = ("control", "bus", "memory", "decode", "dispatch")
    listed = {c for key in families_answered for c in found[key].codes}
    unlisted = {
        pair for pair in _codes_in_source({"error_reply", "Reply"}) if pair[1] not in listed
    }
    assert not unlisted


def test_every_code_memory_raises_is_a_memory_code() -> None:
    codes = families()["memory"].codes
    unlisted = {p for p in _codes_in_source({"MemoryServiceError"}) if p[1] not in codes}
    assert not unlisted


def test_the_control_socket_passes_on_every_bus_and_memory_code() -> None:
    """ControlErrorCode writes the router's and memory's codes out (the CLI loads neither
    package); this holds the copy to both sets."""
    from zeroclaw.bus import RefusalCode
    from zeroclaw.control import ControlErrorCode
    from zeroclaw.memory import MemoryErrorCode

    control = set(get_args(ControlErrorCode))
    assert set(get_args(RefusalCode)) <= control
    assert set(get_args(MemoryErrorCode)) <= control


# Copies left, each for a reason the merge of issue 25 removes: (file, family).
KNOWN_COPIES: set[tuple[str, str]] = set()


def _family_literals() -> dict[str, tuple[str, set[str]]]:
    """Every module-level error-code Literal of the package: name -> (file, codes)."""
    import re

    found: dict[str, tuple[str, set[str]]] = {}
    for path in sorted((REPO / "zeroclaw").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        for stmt in _tree(path).body:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target, value = stmt.targets[0], stmt.value
            if not isinstance(target, ast.Name) or not re.search(
                r"(Code|Refusal|Failure|Reason|ErrorKind)$", target.id
            ):
                continue
            if isinstance(value, ast.Subscript) and getattr(value.value, "id", "") == "Literal":
                elts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
                codes = {e.value for e in elts if isinstance(e, ast.Constant)}
                if len(codes) >= 3:  # a pair is too common to call a copy
                    found[target.id] = (rel, {str(c) for c in codes})
    return found


def test_no_error_code_family_is_written_out_twice() -> None:
    """One list per family (issue 25): a Literal, tuple, set or list spelled out in the
    package or its tests that holds every code of another family is a copy; name the
    family (`Literal[Family, ...]`, `get_args(Family)`) instead."""
    families_ = _family_literals()
    holding: dict[object, set[str]] = {}  # code -> the families that hold it
    for name, (_, codes) in families_.items():
        for code in codes:
            holding.setdefault(code, set()).add(name)
    copies = set()
    root = REPO
    for path in sorted([*(root / "zeroclaw").rglob("*.py"), *(root / "tests").rglob("*.py")]):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        if not any(all(str(c) in text for c in codes) for _, codes in families_.values()):
            continue  # no family's every code is even in the text: no copy to parse for
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Tuple | ast.Set | ast.List):
                elts = node.elts
            elif isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Literal":
                elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            else:
                continue
            written = {e.value for e in elts if isinstance(e, ast.Constant)}
            if len(written) < 3:
                continue  # every family has three codes or more
            candidates = set().union(*(holding.get(code, set()) for code in written))
            for name in candidates:
                home, codes = families_[name]
                if codes <= written and not (rel == home and written == codes):
                    copies.add((rel, name))
    assert copies == KNOWN_COPIES
