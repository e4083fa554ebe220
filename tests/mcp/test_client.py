"""The HTTP client's own parts: a JSON response bounded as a stdio line is, event streams
left to the SDK's per-event bound; what a refused connect says."""

from __future__ import annotations

import errno

import httpx2
import pytest
import trio

from zeroclaw._errno import first_errno
from zeroclaw.mcp._client import (
    BoundedTransport,
    HttpLaunch,
    McpFailure,
    ResponseTooLarge,
    _http_failure,
    _only_failure,
    _unreachable,
    endpoint_of,
)


def answer(request: httpx2.Request) -> httpx2.Response:
    kind = "text/event-stream" if request.url.path == "/sse" else "application/json"
    return httpx2.Response(200, headers={"content-type": kind}, content=b"x" * 5000)


async def test_a_json_response_over_the_bound_is_cut_short_and_a_stream_is_not() -> None:
    transport = BoundedTransport(httpx2.MockTransport(answer), 4096)
    async with httpx2.AsyncClient(transport=transport) as client:
        with pytest.raises(ResponseTooLarge, match="a response over 4096 bytes"):
            await client.get("http://mcp.test/json")
        assert len((await client.get("http://mcp.test/sse")).content) == 5000
    roomy = BoundedTransport(httpx2.MockTransport(answer), 5000)
    async with httpx2.AsyncClient(transport=roomy) as client:
        assert len((await client.get("http://mcp.test/json")).content) == 5000


def test_a_refused_connect_says_its_errno_through_the_wrappers() -> None:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    attempts = OSError("all attempts to connect failed")
    attempts.__cause__ = ExceptionGroup("all attempts", [refused])
    wrapped = httpx2.ConnectError("all attempts to connect failed")
    wrapped.__cause__ = attempts
    assert first_errno(wrapped) == errno.ECONNREFUSED
    assert first_errno(httpx2.ConnectError("no cause")) is None


def test_an_endpoint_is_host_and_port_never_the_path() -> None:
    assert endpoint_of("http://127.0.0.1:9000/mcp?token=secret") == "127.0.0.1:9000"
    assert endpoint_of("https://mcp.example.org/mcp") == "mcp.example.org:443"


def test_a_failure_never_tells_a_header_value_even_cut() -> None:
    secret = "Bearer s3cret-token-value"
    launch = HttpLaunch("h", "http://127.0.0.1:9/mcp", {"Authorization": secret}, 5.0, 65536)
    quoted = httpx2.LocalProtocolError(f"Illegal header value {secret.encode()!r}")
    detail = _unreachable(launch, quoted).detail
    assert "s3cret" not in detail and "<a headers_env value>" in detail, detail
    long = httpx2.LocalProtocolError("x" * 280 + secret)  # cut at 300 inside the value
    assert "s3cr" not in _unreachable(launch, long).detail


LAUNCH = HttpLaunch("h", "http://127.0.0.1:9/mcp", {}, 5.0, 65536)


async def failed_while_cancelled() -> BaseExceptionGroup[BaseException]:
    """The group a session's task group raises when the host is stopped as its initialize
    fails: the failure beside the Cancelled of the host's own (outer) scope, which the
    task group's scope leaves alone because the outer cancel is visible to it."""
    caught: list[BaseExceptionGroup[BaseException]] = []
    with trio.CancelScope() as host:

        async def initialize() -> None:
            host.cancel()  # the host stops just as the server's answer fails
            raise McpFailure("mcp_unavailable", "h: Redirect to elsewhere not followed")

        try:
            async with trio.open_nursery() as session:
                session.start_soon(trio.sleep_forever)
                session.start_soon(initialize)
        except BaseExceptionGroup as group:
            caught.append(group)
        await trio.lowlevel.checkpoint()  # the cancel is level-triggered: it comes back
    assert host.cancelled_caught
    (group,) = caught
    assert group.subgroup(trio.Cancelled) is not None, group  # both, as under load
    return group


async def test_a_failure_beside_the_hosts_cancel_is_still_the_failure() -> None:
    # Under load the host was stopped while a retry's initialize failed: the group held
    # the McpFailure and a Cancelled, was not read as the failure, and escaped the host.
    group = await failed_while_cancelled()
    for read in (_only_failure(group), _http_failure(LAUNCH, group)):
        assert isinstance(read, McpFailure) and read.code == "mcp_unavailable", read


async def test_a_cancel_alone_is_not_a_failure() -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as cancelled:
            group = BaseExceptionGroup("session", [cancelled])
            assert _only_failure(group) is None and _http_failure(LAUNCH, group) is None
            raise
