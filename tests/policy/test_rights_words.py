"""The debug log of a Landlock ruleset names each rule's rights in words (issue 14)."""

from __future__ import annotations

from zeroclaw.policy._landlock import (
    EXECUTE,
    READ,
    READ_FILE,
    RUN,
    WRITE_FILE,
    _handled,
    describe_rights,
)

HANDLED = _handled(7)


def test_every_right_is_all() -> None:
    assert describe_rights(HANDLED, HANDLED) == "all"
    assert describe_rights(-1, HANDLED) == "all"  # masked to the ABI's rights


def test_a_workspace_grant_is_all_but_execute() -> None:
    assert describe_rights(HANDLED & ~EXECUTE, HANDLED) == "all but execute"


def test_other_grants_are_named() -> None:
    assert describe_rights(READ, HANDLED) == "read_file+read_dir"
    assert describe_rights(RUN, HANDLED) == "execute+read_file"
    assert describe_rights(READ_FILE | WRITE_FILE, HANDLED) == "write_file+read_file"
    assert describe_rights(0, HANDLED) == "none"
