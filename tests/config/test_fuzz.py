"""Property: loading any document returns a Config or raises ConfigError with keyed issues."""

from __future__ import annotations

import copy
from typing import Any

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import VALID_DOC
from zeroclaw.config import Config, ConfigError, load_config_text, validate_document

ENV = {"HOME": "/home/op"}

names = st.one_of(
    st.sampled_from(
        [
            "alpha",
            "beta",
            "gamma",
            "default",
            "daemon",
            "all",
            "cli",
            "ops",
            "sup",
            "offline.default",
            "cli.local",
            "*",
            "@x",
        ]
    ),
    st.text(min_size=0, max_size=40),
)
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    names,
    st.text(max_size=5000),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(names, inner, max_size=5)),
    max_leaves=20,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            out.extend(_paths(child, (*prefix, key)))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            out.extend(_paths(child, (*prefix, i)))
    return out


@st.composite
def mutated_documents(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(VALID_DOC)
    for _ in range(draw(st.integers(1, 6))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["delete", "replace", "add_key", "reference"]))
        last = path[-1]
        if action == "delete":
            if isinstance(parent, dict):
                del parent[last]
            else:
                parent.pop(last)
        elif action == "replace":
            parent[last] = draw(values)
        elif action == "add_key" and isinstance(parent, dict):
            parent[draw(names)] = draw(values)
        else:
            parent[last] = draw(names)
    return doc


def check(doc: Any) -> None:
    try:
        config = validate_document(doc, source="fuzz.toml", env=ENV)
    except ConfigError as exc:
        assert exc.issues
        for issue in exc.issues:
            assert isinstance(issue.message, str) and issue.message
            assert issue.format("fuzz.toml").startswith("fuzz.toml")
    else:
        assert isinstance(config, Config)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_documents())
def test_mutated_documents_never_crash(doc: dict[str, Any]) -> None:
    check(doc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.one_of(st.sampled_from(list(VALID_DOC)), names), values, max_size=8))
def test_random_documents_never_crash(doc: dict[str, Any]) -> None:
    check(doc)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_documents())
def test_round_trip_through_toml_text_never_crashes(doc: dict[str, Any]) -> None:
    try:
        text = tomli_w.dumps(doc)
    except (TypeError, ValueError):
        return  # not representable as TOML (e.g. nan keys); nothing to parse
    try:
        load_config_text(text, source="fuzz.toml", env=ENV)
    except ConfigError as exc:
        assert exc.issues


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes(text: str) -> None:
    try:
        load_config_text(text, source="fuzz.toml", env=ENV)
    except ConfigError as exc:
        assert exc.issues


def test_deep_nesting_is_an_issue_not_a_crash() -> None:
    doc: dict[str, Any] = {}
    node = doc
    for _ in range(5000):
        node["x"] = {}
        node = node["x"]
    check({"agents": doc})


def test_deeply_nested_inline_toml_is_an_issue_not_a_crash() -> None:
    try:
        load_config_text("x = " + "[" * 20000 + "]" * 20000, source="deep.toml", env=ENV)
    except ConfigError as exc:
        assert exc.issues


def test_a_home_of_a_user_the_machine_does_not_have_is_a_config_error_not_a_crash() -> None:
    from pathlib import Path

    from tests.supervisor.harness import agent_entry, make_config
    from zeroclaw.config import ConfigError, validate_document

    doc = make_config(Path("/nonexistent/zc"), {"alpha": agent_entry()})
    doc["daemon"]["state_dir"] = "~no-such-user-0/state"
    try:
        validate_document(doc)
    except ConfigError as exc:
        assert any("no such user" in line for line in exc.lines()), exc.lines()
    else:
        raise AssertionError("a ~user that does not exist was accepted")
