"""The turn engine: identity files, budgets, iteration cap, transcript discipline."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from tests.agent.helpers import local_engine, run_turns
from tests.providers.protocol_server import TEXT, TOOL_CALL, ScriptedServer, status
from tests.providers.test_network import make
from zeroclaw.agent._turn import MAX_IDENTITY_BYTES, system_prompt
from zeroclaw.cli._local_reach import LocalReach
from zeroclaw.providers import OfflineProvider
from zeroclaw.tools import ToolResult
from zeroclaw.turns import Delta, ToolCallRecord, ToolUsed, TurnEvent


def test_identity_files_form_the_system_prompt_in_a_fixed_order(tmp_path: Path) -> None:
    (tmp_path / "USER.md").write_text("The user is Dana.")
    (tmp_path / "IDENTITY.md").write_text("I am Alpha, the ops assistant.\n")
    (tmp_path / "SOUL.md").write_text("x" * (MAX_IDENTITY_BYTES + 100))
    (tmp_path / "NOTES.md").write_text("not an identity file")
    prompt = system_prompt(str(tmp_path))
    assert prompt.startswith("# IDENTITY.md\nI am Alpha, the ops assistant.\n\n# SOUL.md\nxxx")
    assert prompt.endswith("# USER.md\nThe user is Dana.")
    assert "x" * MAX_IDENTITY_BYTES in prompt and "x" * (MAX_IDENTITY_BYTES + 1) not in prompt
    assert "NOTES" not in prompt and "AGENTS.md" not in prompt
    assert system_prompt(str(tmp_path / "missing")) == ""


async def test_who_are_you_answers_from_the_identity(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "IDENTITY.md").write_text("# Alpha\n\nI keep the lights on.\n")
    results, _, _ = await run_turns(OfflineProvider(), tmp_path, ["who are you?"])
    assert results[0].reply == "I keep the lights on."


async def test_max_actions_per_hour_refuses_the_next_tool_call(tmp_path: Path) -> None:
    results, _, _ = await run_turns(
        OfflineProvider(),
        tmp_path,
        ["list", "read notes.txt", "read notes.txt"],
        runtime={"max_actions_per_hour": 2},
    )
    assert [r.tool_calls[0].error_code for r in results] == [None, None, "rate_limited"]


async def test_the_transcript_holds_completed_turns_in_order(tmp_path: Path) -> None:
    _, _, turns = await run_turns(OfflineProvider(), tmp_path, ["hello", "history"])
    assert [(t["role"], t["content"][:12]) for t in turns] == [
        ("user", "hello"),
        ("assistant", "Hello, I am "),
        ("user", "history"),
        ("assistant", "Earlier in t"),
    ]


async def test_max_tool_iterations_stops_a_model_that_keeps_calling(
    server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers += [TOOL_CALL["openai"](f"c{i}", "file_list", {"path": "."}) for i in range(5)]
    results, _, _ = await run_turns(
        make("openai", server.url), tmp_path, ["look around"], runtime={"max_tool_iterations": 2}
    )
    assert [c.name for c in results[0].tool_calls] == ["file_list", "file_list"]
    assert results[0].reply == "(stopped after 2 tool calls)"
    assert len(server.seen) == 3


async def test_a_failed_turn_leaves_no_half_exchange_in_the_transcript(
    server: ScriptedServer, tmp_path: Path
) -> None:
    server.answers += [status(400, "bad request"), TEXT["openai"]("fine")]
    results, _, turns = await run_turns(make("openai", server.url), tmp_path, ["one", "two"])
    assert results[0].error is not None and results[1].reply == "fine"
    assert [(t["role"], t["content"]) for t in turns] == [("user", "two"), ("assistant", "fine")]
    # the second request carried no trace of the failed first turn
    assert [m["role"] for m in server.seen[1].body["messages"]] == ["user"]


async def test_an_unanswered_approval_is_a_denial(tmp_path: Path) -> None:
    asked: list[str] = []

    async def never_answers(what: str) -> bool:
        asked.append(what)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with local_engine(OfflineProvider(), tmp_path, approval_timeout=0.05) as (engine, _):
        result = await engine.run_turn("write a.txt: hi", approver=never_answers)
    assert asked == ["write a.txt"]
    assert result.tool_calls[0].error_code == "approval_denied"
    assert not (tmp_path / "ws" / "a.txt").exists()


async def test_a_tool_that_raises_fails_only_its_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The last-resort guard: an exception out of a tool (here the peer reach, as a broken
    bus would) is `internal_error` for that call, logged once with its traceback, and the
    engine goes on to the next turn."""

    class BrokenPeers(LocalReach):
        async def message_peer(
            self,
            to: str,
            text: str,
            *,
            delegate: bool,
            depth: int,
            session: str = "default",
            turn: str | None = None,
        ) -> ToolResult:
            raise RuntimeError("the bus is gone")

    async with local_engine(OfflineProvider(), tmp_path) as (engine, reach):
        engine.reach = BrokenPeers(reach.service, "alpha")
        with caplog.at_level(logging.ERROR, logger="zeroclaw.agent"):
            broken = await engine.run_turn("ask beta: hello")
        after = await engine.run_turn("read notes.txt")
    assert broken.tool_calls[0].error_code == "internal_error"
    assert "RuntimeError" in broken.reply and "the bus is gone" not in broken.reply
    logged = [r for r in caplog.records if r.exc_info]
    assert len(logged) == 1 and "tool send_message_to_peer raised" in logged[0].getMessage()
    assert after.tool_calls[0].error_code is None and "ship" in after.reply


async def test_a_turn_limited_to_some_tools_refuses_the_others_uncounted(tmp_path: Path) -> None:
    async with local_engine(OfflineProvider(), tmp_path, runtime={"max_actions_per_hour": 1}) as (
        engine,
        _,
    ):
        nothing = engine.toolset.only((), "peer_tools")
        refused = await engine.run_turn("read notes.txt", toolset=nothing)
        assert refused.tool_calls[0].error_code == "tool_not_granted"
        assert "tool_not_granted" in refused.reply and "ship" not in refused.reply
        reads = engine.toolset.only({"file_read"}, "peer_tools")
        refused = await engine.run_turn("recall plan", toolset=reads)
        assert refused.tool_calls[0].error_code == "tool_not_granted"
        # A refusal took nothing from the hourly budget of 1: the granted read still runs.
        granted = await engine.run_turn("read notes.txt", toolset=reads)
        assert granted.tool_calls[0].error_code is None and "ship" in granted.reply


async def test_the_engine_emits_typed_turn_events_and_records(tmp_path: Path) -> None:
    events: list[TurnEvent] = []

    async def on_event(event: TurnEvent) -> None:
        events.append(event)

    async with local_engine(OfflineProvider(), tmp_path) as (engine, _):
        result = await engine.run_turn("read notes.txt", on_event=on_event)
    assert events[0] == ToolUsed("file_read", {"path": "notes.txt"}, True, None)
    deltas = events[1:]
    assert all(isinstance(e, Delta) for e in deltas)
    assert "".join(e.text for e in deltas if isinstance(e, Delta)) == result.reply
    assert result.tool_calls == [ToolCallRecord("file_read", {"path": "notes.txt"}, True, None)]
    assert result.as_json()["tool_calls"] == [
        {"name": "file_read", "args": {"path": "notes.txt"}, "ok": True, "error_code": None}
    ]
