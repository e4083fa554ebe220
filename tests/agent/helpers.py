"""Running the turn engine in the test process with a real memory store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import trio

from zeroclaw.agent import AgentSpec, MemorySpec, RiskSpec, RuntimeSpec
from zeroclaw.agent._turn import TurnEngine, TurnResult
from zeroclaw.cli._local_reach import LocalReach
from zeroclaw.memory import MemoryGrants, MemoryService, MemoryStore
from zeroclaw.providers import OfflineSpec, Provider
from zeroclaw.turns import MEMORY_SESSION, SessionArgs, TurnEvent


def agent_spec(
    workspace: Path,
    *,
    runtime: dict[str, Any] | None = None,
    memory: MemorySpec | None = None,
    level: str = "supervised",
) -> AgentSpec:
    return AgentSpec(
        alias="alpha",
        workspace=str(workspace),
        activation="always",
        idle_stop_secs=600,
        provider="offline.default",
        provider_config=OfflineSpec(),
        risk=RiskSpec(
            profile="sup",
            level=level,  # type: ignore[arg-type]
            workspace_only=True,
            allowed_commands=("ls",),
            forbidden_paths=(),
            require_approval_for_medium_risk=True,
            block_high_risk_commands=True,
            sandbox="none",
        ),
        runtime=msgspec.convert(
            {
                "max_tool_iterations": 4,
                "max_actions_per_hour": 100,
                "shell_timeout_secs": 5,
                **(runtime or {}),
            },
            RuntimeSpec,
        ),
        channels=("cli.local",),
        delegates=(),
        access={},
        other_workspaces=(),
        read_memory_from=(),
        secret_env=(),
        state_dir=str(workspace.parent),
        runtime_dir=str(workspace.parent),
        log_format="text",
        log_level="info",
        memory=memory or MemorySpec(),
    )


@asynccontextmanager
async def local_engine(
    provider: Provider,
    tmp_path: Path,
    *,
    runtime: dict[str, Any] | None = None,
    spec_changes: dict[str, Any] | None = None,
    memory: MemorySpec | None = None,
    level: str = "supervised",
    grants: MemoryGrants | None = None,
    **options: Any,
) -> AsyncIterator[tuple[TurnEngine, LocalReach]]:
    """alpha's turn engine in this process: a workspace holding notes.txt, a real memory
    store with its committer running. The provider is closed on the way out.
    `spec_changes`: fields of alpha's spec that differ."""
    workspace = tmp_path / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text("the plan is to ship")
    store = MemoryStore(tmp_path / "memory")
    try:
        service = MemoryService(store, grants or MemoryGrants({}))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service.run_committer)
            reach = LocalReach(service, "alpha")
            spec = msgspec.structs.replace(
                agent_spec(workspace, runtime=runtime, memory=memory, level=level),
                **(spec_changes or {}),
            )
            yield TurnEngine(spec, reach, provider, agent_env={}, **options), reach
            nursery.cancel_scope.cancel()
    finally:
        store.close()
        await provider.aclose()


async def run_turns(
    provider: Provider,
    tmp_path: Path,
    texts: list[str],
    *,
    runtime: dict[str, Any] | None = None,
    session: str = "default",
) -> tuple[list[TurnResult], list[dict[str, Any]], list[dict[str, Any]]]:
    """Run turns in order; returns their results, every event, and the session transcript."""
    events: list[dict[str, Any]] = []

    async def on_event(event: TurnEvent) -> None:
        events.append(msgspec.to_builtins(event))

    async with local_engine(provider, tmp_path, runtime=runtime) as (engine, reach):
        results = [
            await engine.run_turn(text, on_event=on_event, session=session) for text in texts
        ]
        transcript = await reach.memory(MEMORY_SESSION, SessionArgs(session=session))
    return results, events, msgspec.to_builtins(transcript)["turns"]
