"""The shell tool's pure decision, over every combination of profile level, allowlist,
command risk, high-risk blocking and approval: run, refuse (with its code) or ask."""

from __future__ import annotations

import itertools
from pathlib import PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.policy import Access, PathDecision
from zeroclaw.tools import ShellDecision, decide_shell

LEVELS = ("readonly", "supervised", "full")
COMMANDS = {"low": "ls -l", "medium": "touch a.txt", "high": "rm a.txt"}


def anywhere(path: str, access: Access) -> PathDecision:
    return PathDecision(True, None, PurePosixPath("/ws") / path, "allowed", PurePosixPath("/ws"))


def expected(
    level: str, allowlisted: bool, risk: str, block_high_risk: bool, require_approval: bool
) -> tuple[str, str | None]:
    """The rule, written out independently of the code under test."""
    if level == "readonly":
        return "refuse", "read_only_profile"
    if not allowlisted:
        return "refuse", "command_not_allowed"
    if risk == "high" and block_high_risk:
        return "refuse", "command_not_allowed"
    if level == "supervised" and require_approval and risk != "low":
        return "ask", None
    return "run", None


CASES = list(itertools.product(LEVELS, (True, False), COMMANDS, (True, False), (True, False)))


@pytest.mark.parametrize(
    ("level", "allowlisted", "risk", "block_high_risk", "require_approval"), CASES
)
def test_every_combination_decides_as_the_rule_says(
    level: str, allowlisted: bool, risk: str, block_high_risk: bool, require_approval: bool
) -> None:
    command = COMMANDS[risk]
    program = command.split()[0]
    decision = decide_shell(
        command,
        allowed_commands=frozenset({program} if allowlisted else {"echo"}),
        may_run_shell=level != "readonly",
        block_high_risk=block_high_risk,
        asks_approval=level == "supervised" and require_approval,
        check_path=anywhere,
    )
    verdict, code = expected(level, allowlisted, risk, block_high_risk, require_approval)
    assert (decision.verdict, decision.code) == (verdict, code)
    assert decision.argv == tuple(command.split())
    if verdict == "ask":
        assert decision.reason == f"run: {command}"  # what the operator is asked


def test_the_table_is_exhaustive() -> None:
    assert len(CASES) == 3 * 2 * 3 * 2 * 2


def test_a_path_argument_refused_by_the_policy_refuses_with_the_paths_code() -> None:
    def nowhere(path: str, access: Access) -> PathDecision:
        return PathDecision(False, "forbidden_path", None, "forbidden")

    decision = decide_shell(
        "cat secret",
        allowed_commands=frozenset({"cat"}),
        may_run_shell=True,
        block_high_risk=True,
        asks_approval=False,
        check_path=nowhere,
    )
    assert decision == ShellDecision("refuse", ("cat", "secret"), "forbidden_path", decision.reason)
    assert "forbidden" in decision.reason


@given(st.text(max_size=200), st.booleans(), st.booleans(), st.booleans())
def test_any_text_gets_one_verdict_and_only_a_refusal_has_a_code(
    command: str, may_run: bool, block: bool, asks: bool
) -> None:
    decision = decide_shell(
        command,
        allowed_commands=frozenset({"ls", "touch", "rm", "sh"}),
        may_run_shell=may_run,
        block_high_risk=block,
        asks_approval=asks,
        check_path=anywhere,
    )
    assert decision.verdict in ("run", "refuse", "ask")
    assert (decision.code is not None) == (decision.verdict == "refuse")
    if decision.verdict == "ask":
        assert asks
