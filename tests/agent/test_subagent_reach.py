"""`BusReach.subagent` over a real router: the request reaches the "subagent" service with
the router's identity of the caller, an answer decodes into its struct, and refusals (the
service's codes, the bus's, an answer that does not decode) come back as tool errors.

The service here is a scripted handler registered on the router exactly as the daemon
registers its own; what the daemon's service decides is tested with the daemon.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import zmq

from tests.bodies import raw
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw._ops import decode_body
from zeroclaw.agent._runtime import CATALOG_WAIT_SECS, DISPATCH_WAIT_SECS, BusReach
from zeroclaw.bus import AgentBus, BusCredentials, NoHooks, Request, Response, Router
from zeroclaw.config import validate_document
from zeroclaw.turns import (
    SUBAGENT_SERVICE,
    CatalogAnswer,
    CatalogCall,
    CatalogEntry,
    DispatchAnswer,
    DispatchCall,
)

Answer = Callable[[str, Request], Response]


class _Joined(NoHooks):
    def __init__(self) -> None:
        self.joined = trio.Event()

    def agent_hello(
        self, alias: str, pid: int, sandbox: str = "", sandbox_in_force: bool = False
    ) -> None:
        self.joined.set()


@asynccontextmanager
async def alpha_reach(
    root: Path, answer: Answer | None, seen: list[tuple[str, Request]]
) -> AsyncIterator[BusReach]:
    """alpha's BusReach on a real bus to a real router; `answer` is the subagent service
    (None: no such service on the router)."""
    doc = make_config(root, {"alpha": agent_entry()})
    (root / "run").mkdir(parents=True, exist_ok=True)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    hooks = _Joined()

    def service(sender: str, request: Request) -> Response:
        seen.append((sender, request))
        assert answer is not None
        return answer(sender, request)

    try:
        services = {} if answer is None else {SUBAGENT_SERVICE: service}
        router = Router(validate_document(doc), root / "run", ctx, services=services, hooks=hooks)
        async with trio.open_nursery() as nursery:
            await nursery.start(router.run)
            keys = router.mint_keys("alpha")
            bus = AgentBus(
                BusCredentials(
                    "alpha", keys.endpoint, keys.server_public, keys.public, keys.secret, 1 << 20
                )
            )
            await nursery.start(bus.run)
            await hooks.joined.wait()
            try:
                yield BusReach(bus)
            finally:
                nursery.cancel_scope.cancel()
    finally:
        ctx.term()


def ok(body: Any) -> Answer:
    return lambda sender, request: Response(id=request.id, ok=True, body=raw(body))


def refused(code: str, detail: str) -> Answer:
    return lambda sender, request: Response(id=request.id, ok=False, error=code, detail=detail)


async def test_a_catalog_answer_decodes_and_the_caller_is_the_routers_identity(
    tmp_path: Path,
) -> None:
    catalog = CatalogAnswer([CatalogEntry("summarizer", "Summarise.", {"type": "object"})])
    seen: list[tuple[str, Request]] = []
    async with alpha_reach(tmp_path, ok(catalog), seen) as reach:
        result = await reach.subagent("catalog", CatalogCall())
    assert result.ok and msgspec.convert(result.data, CatalogAnswer) == catalog
    [(sender, request)] = seen
    assert (sender, request.service, request.op) == ("alpha", SUBAGENT_SERVICE, "catalog")


async def test_a_dispatch_carries_its_call_and_returns_the_ended_invocation(
    tmp_path: Path,
) -> None:
    answer = DispatchAnswer("inv-1", "timed_out", error_code="subagent_timed_out")
    seen: list[tuple[str, Request]] = []
    async with alpha_reach(tmp_path, ok(answer), seen) as reach:
        call = DispatchCall("content-analyst", "analyse", {"text": "hi"})
        result = await reach.subagent("dispatch", call)
    # The reach only decodes: whether the invocation succeeded is the tool's to say.
    assert result.ok and result.data == msgspec.to_builtins(answer)
    assert decode_body(seen[0][1].body, DispatchCall) == call
    assert seen[0][1].op == "dispatch"


@pytest.mark.parametrize(
    ("code", "detail"),
    [
        ("subagent_not_found", "no sub-agent 'nope'"),
        ("subagent_caller_not_allowed", "alpha may not call summarizer"),
        ("subagent_input_invalid", "/text: 'text' is a required property"),
        ("subagent_concurrency_limit", "8 invocations run"),
        ("storage_error", "the invocation store failed"),
    ],
)
async def test_a_service_refusal_is_a_tool_error_with_its_code(
    tmp_path: Path, code: str, detail: str
) -> None:
    seen: list[tuple[str, Request]] = []
    async with alpha_reach(tmp_path, refused(code, detail), seen) as reach:
        result = await reach.subagent("dispatch", DispatchCall("x", "t"))
    assert (result.ok, result.error_code, result.detail) == (False, code, detail)


async def test_an_unknown_refusal_code_is_unavailable_and_keeps_its_detail(
    tmp_path: Path,
) -> None:
    async with alpha_reach(tmp_path, refused("brand_new", ""), []) as reach:
        result = await reach.subagent("catalog", CatalogCall())
    assert (result.error_code, result.detail) == ("unavailable", "brand_new")


async def test_a_router_without_the_service_says_unknown_service(tmp_path: Path) -> None:
    async with alpha_reach(tmp_path, None, []) as reach:
        result = await reach.subagent("catalog", CatalogCall())
    assert result.error_code == "unknown_service" and "subagent" in result.detail


@pytest.mark.parametrize(
    ("op", "body"),
    [
        ("catalog", {"entries": [{"id": "x"}]}),  # no description
        ("catalog", "entries"),
        ("dispatch", {"invocation_id": "i", "state": "exploded"}),
        ("dispatch", None),
    ],
)
async def test_an_answer_that_does_not_decode_is_malformed(
    tmp_path: Path, op: str, body: Any
) -> None:
    call = CatalogCall() if op == "catalog" else DispatchCall("x", "t")
    async with alpha_reach(tmp_path, ok(body), []) as reach:
        result = await reach.subagent(op, call)  # type: ignore[arg-type]
    assert result.error_code == "malformed" and "sub-agent service" in result.detail


def test_a_dispatch_waits_long_but_bounded_and_a_catalog_briefly() -> None:
    # The daemon enforces each sub-agent's timeout; the agent's own wait only bounds a
    # daemon that never answers.
    assert 600 <= DISPATCH_WAIT_SECS <= 24 * 3600
    assert CATALOG_WAIT_SECS <= 60
