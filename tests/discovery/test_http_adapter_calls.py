"""Registered HTTP adapters called through the adapter service (ADR 0054), run by the
daemon's real runner against real HTTP services on loopback: admitted like a CLI adapter
(grant, side effect, approval of that input), reached only at an endpoint the caller's risk
profile lists — refused before any connection otherwise — with the bearer token sent and
never shown, replies capped, and every failure typed with whether to try again."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from tests.bodies import raw
from tests.discovery.helpers import Project
from tests.discovery.http_service import HttpService
from tests.known_secrets import ADAPTER_KEY
from zeroclaw._ops import decode_body
from zeroclaw.bus import Request, Response
from zeroclaw.config import load_config
from zeroclaw.discovery import DiscoveryService
from zeroclaw.events import EventSink
from zeroclaw.supervisor._adapters import adapter_runner
from zeroclaw.supervisor._spec import build_specs
from zeroclaw.turns import AdapterAdmission, AdapterResult, adapter_approval_question

KEY_ENV = "ZC_API_KEY"


@dataclass
class World:
    svc: DiscoveryService
    events: EventSink
    main: HttpService  # every profile but `closed` lists it
    other: HttpService  # listed too: only a redirect points at it
    far: HttpService  # listed by no profile


def manifests(main: HttpService, other: HttpService, far: HttpService) -> dict[str, str]:
    def http(endpoint: str, extra: str = "", caps: str = "chat.reply") -> str:
        return f"transport: http\nendpoint: {endpoint}\ncapabilities: [{caps}]\n{extra}"

    key = f"api_key_env: {KEY_ENV}\n"
    files = {
        "api": http(main.url("/ok"), key),
        "text": http(main.url("/text")),
        "big": http(main.url("/big?n=100000"), "max_output_bytes: 1000\n"),
        "slow": http(main.url("/hang"), "timeout_ms: 300\n"),
        "redirect": http(main.url(f"/redirect?to={other.url('/ok')}"), key),
        "echo": http(main.url("/echo-key"), key),
        "zipped": http(main.url("/gzip")),
        "tickets": http(main.url("/ok"), key, caps="ticket.create"),
        "far": http(far.url("/ok"), key),
        "fromenv": f"transport: http\nendpoint_env: ZC_API_URL\n{key}capabilities: [chat.reply]\n",
        "unset": "transport: http\nendpoint_env: ZC_NOT_SET\ncapabilities: [chat.reply]\n",
        "nokey": http(main.url("/ok"), "api_key_env: ZC_KEY_NOT_SET\n"),
        "gone": http("http://127.0.0.1:1/ok"),  # a listed port where nothing listens
        **{f"s{code}": http(main.url(f"/status/{code}")) for code in (401, 404, 429, 500)},
    }
    return {name: f"id: {name}\n{body}" for name, body in files.items()}


def project(tmp_path: Path, main: HttpService, other: HttpService, far: HttpService) -> Project:
    project = Project(tmp_path)
    docs = manifests(main, other, far)
    for name, text in docs.items():
        project.file(f"adapters/{name}.yaml", text)
    project.file(
        "capabilities/ticket.yaml",
        "name: ticket.create\nside_effect: writes_external\naudit: [agent, adapter]\n",
    )
    listed = [main.endpoint, other.endpoint, "127.0.0.1:1"]
    project.extra["risk_profiles"] = {
        level[:3]: {"level": level, "allowed_endpoints": listed}
        for level in ("readonly", "supervised", "full")
    } | {"closed": {"level": "supervised"}}
    entry: dict[str, Any] = {
        "model_provider": "offline.default",
        "runtime_profile": "default",
        "channels": ["cli.local"],
        "adapters": sorted(docs),
    }
    project.extra["agents"] = {
        alias: {**entry, "risk_profile": profile, "workspace": {"path": str(tmp_path / alias)}}
        for alias, profile in (
            ("reader", "rea"),
            ("alpha", "sup"),
            ("boss", "ful"),
            ("stranger", "closed"),
        )
    }
    for alias in project.extra["agents"]:
        (tmp_path / alias).mkdir()
    project.write_config()
    return project


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    main, other, far = HttpService(ADAPTER_KEY), HttpService(ADAPTER_KEY), HttpService()
    async with trio.open_nursery() as nursery:
        for service in (main, other, far):
            await nursery.start(service.serve)
        proj = project(tmp_path, main, other, far)
        config = load_config(proj.config_path)
        env = {**proj.env(), KEY_ENV: ADAPTER_KEY, "ZC_API_URL": main.url("/text")}
        specs = build_specs(config, env, proj.root, config_path=proj.config_path)
        events = EventSink()
        svc = DiscoveryService(
            config, proj.config_path, events, env, runner=adapter_runner(lambda: specs, env)
        )
        await svc.rescan(refresh=True)
        yield World(svc, events, main, other, far)
        nursery.cancel_scope.cancel()


def request(op: str, **body: Any) -> Request:
    return Request(id="r1", service="adapter", op=op, body=raw(body))


async def invoke(
    world: World, agent: str, adapter: str, text: str = "hello", **kw: Any
) -> Response:
    return await world.svc.serve(agent, request("invoke", adapter=adapter, input=text, **kw))


def result(response: Response) -> AdapterResult:
    assert response.ok, response
    return decode_body(response.body, AdapterResult)


async def test_every_http_adapter_is_registered_and_callable(world: World) -> None:
    assert world.svc.snapshot is not None
    refused = {
        e.item.id: e.decision.reason
        for e in world.svc.snapshot.entries
        if e.item.kind == "http_adapter" and not e.decision.registered
    }
    assert refused == {}
    assert {"api", "far", "fromenv", "s500"} <= set(world.svc.registry.active)


async def test_a_call_posts_the_capability_and_input_with_the_bearer_token(world: World) -> None:
    got = result(await invoke(world, "reader", "api", 'look at "main.py"'))
    assert (got.exit_code, got.error, got.status, got.truncated) == (0, "", 200, False)
    # the service's indented JSON, compactly; it saw the right token
    assert json.loads(got.output) == {
        "capability": "chat.reply",
        "input": 'look at "main.py"',
        "authorized": True,
    }
    assert '", "' not in got.output and "\n" not in got.output
    [seen] = world.main.seen
    assert (seen.method, seen.path) == ("POST", "/ok")
    assert seen.headers["authorization"] == f"Bearer {ADAPTER_KEY}"
    assert seen.headers["content-type"] == "application/json"
    assert json.loads(seen.body) == {"capability": "chat.reply", "input": 'look at "main.py"'}
    text = result(await invoke(world, "reader", "text", "x"))
    assert text.output == "got x"
    assert "authorization" not in world.main.seen[-1].headers  # no key named: none sent


async def test_the_endpoint_may_come_from_the_daemons_environment(world: World) -> None:
    assert result(await invoke(world, "alpha", "fromenv", "y")).output == "got y"
    unset = await invoke(world, "alpha", "unset")
    assert (unset.ok, unset.error) == (False, "endpoint_invalid")
    nokey = await world.svc.serve("alpha", request("admit", adapter="nokey"))
    assert (nokey.ok, nokey.error) == (False, "api_key_missing")
    assert "ZC_KEY_NOT_SET" in nokey.detail


async def test_an_endpoint_the_profile_does_not_list_is_refused_before_any_connection(
    world: World,
) -> None:
    for agent, adapter in (("alpha", "far"), ("stranger", "api"), ("stranger", "far")):
        for op in ("admit", "invoke"):
            refused = await world.svc.serve(agent, request(op, adapter=adapter, input="x"))
            assert (refused.ok, refused.error) == (False, "endpoint_not_allowed"), (agent, adapter)
            assert "allowed_endpoints" in refused.detail
    assert world.far.seen == [] and world.main.seen == []


async def test_the_output_is_capped_at_max_output_bytes(world: World) -> None:
    got = result(await invoke(world, "alpha", "big"))
    assert (got.output, got.truncated, got.error) == ("x" * 1000, True, "")


async def test_no_reply_within_timeout_ms_is_a_retryable_timeout(world: World) -> None:
    got = result(await invoke(world, "alpha", "slow"))
    assert (got.error, got.retryable, got.timed_out, got.exit_code) == (
        "http_timeout",
        True,
        True,
        None,
    )
    assert world.main.arrived.is_set()  # it was asked, and never answered in time


@pytest.mark.parametrize(
    ("code", "retryable"), [(401, False), (404, False), (429, True), (500, True)]
)
async def test_a_status_other_than_2xx_is_typed_with_retryable(
    world: World, code: int, retryable: bool
) -> None:
    got = result(await invoke(world, "alpha", f"s{code}"))
    assert (got.error, got.status, got.retryable, got.exit_code) == (
        "http_status",
        code,
        retryable,
        None,
    )
    assert json.loads(got.output) == {"error": f"status {code}"}
    assert got.detail == f'HTTP {code}: {{"error":"status {code}"}}'


async def test_a_redirect_to_another_origin_is_not_followed(world: World) -> None:
    got = result(await invoke(world, "alpha", "redirect"))
    assert (got.error, got.status, got.retryable) == ("http_status", 302, False)
    assert world.other.seen == []  # listed in the profile, and still never asked


async def test_a_connection_refused_is_retryable_unavailable(world: World) -> None:
    got = result(await invoke(world, "alpha", "gone"))
    assert (got.error, got.retryable, got.status) == ("http_unavailable", True, 0)
    assert got.detail == "cannot reach 127.0.0.1:1: Connection refused (ECONNREFUSED)"


async def test_a_reply_in_an_encoding_not_asked_for_is_not_read(world: World) -> None:
    got = result(await invoke(world, "alpha", "zipped"))
    assert (got.error, got.retryable) == ("http_bad_reply", False)
    assert world.main.seen[-1].headers["accept-encoding"] == "identity"


async def test_admission_goes_by_profile_and_side_effect(world: World) -> None:
    svc = world.svc
    # chat.reply has no side effect: every level may call it, nobody is asked
    for agent in ("reader", "alpha", "boss"):
        admitted = await svc.serve(agent, request("admit", adapter="api"))
        assert not decode_body(admitted.body, AdapterAdmission).needs_approval
    # ticket.create writes outside: readonly is refused, supervised asked, full not
    refused = await invoke(world, "reader", "tickets", turn="t1")
    assert (refused.ok, refused.error) == (False, "read_only_profile")
    admitted = decode_body(
        (await svc.serve("alpha", request("admit", adapter="tickets"))).body, AdapterAdmission
    )
    assert admitted.needs_approval and admitted.side_effect == "writes_external"
    # the question names where it goes, never the token
    question = adapter_approval_question(admitted, "open one")
    assert f"POST {world.main.url('/ok')}" in question and ADAPTER_KEY not in question
    denied = await invoke(world, "alpha", "tickets", "open one", turn="t1")
    assert (denied.ok, denied.error) == (False, "approval_denied")
    assert world.main.seen == []  # nothing was sent for either
    svc.approvals.record("alpha", "t1", adapter_approval_question(admitted, "another"))
    assert (await invoke(world, "alpha", "tickets", "open one", turn="t1")).error == (
        "approval_denied"
    )  # a yes covers that input only
    svc.approvals.record("alpha", "t1", question)
    assert result(await invoke(world, "alpha", "tickets", "open one", turn="t1")).exit_code == 0
    assert result(await invoke(world, "boss", "tickets", "open two")).exit_code == 0
    assert len(world.main.seen) == 2
    nothing = await svc.serve("alpha", request("admit", adapter="api", tool="x"))
    assert (nothing.ok, nothing.error) == (False, "bad_arguments")


async def test_the_token_reaches_no_log_event_or_result(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    answers = [
        await invoke(world, "alpha", name)
        for name in ("api", "echo", "redirect", "gone", "s401", "far", "slow")
    ]
    echoed = result(answers[1])
    assert echoed.output == "you sent Bearer <redacted>"  # the service echoed it: cut out
    assert world.main.seen[1].headers["authorization"] == f"Bearer {ADAPTER_KEY}"
    seen = (
        caplog.text.encode(),
        *(msgspec.msgpack.encode(a) for a in answers),  # the whole answer on the bus
        *(msgspec.json.encode(p.event) for p in world.events.recent()),
    )
    assert not [data for data in seen if ADAPTER_KEY.encode() in data]
