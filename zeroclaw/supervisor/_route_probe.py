"""`route probe`: make one agent's process send a probe to another through the router.

What can be answered without the agents (an unknown alias, no channel, a sender that is
not running) is decided by `probe_refusal`, pure; the rest is the agent's round trip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..control import ControlErrorCode, Exchange, ProbeReply, Reply, RouteProbe, control_code
from ._lifecycle import State

if TYPE_CHECKING:
    from collections.abc import Container

    from ..bus import Router
    from ._fleet import Fleet

PROBE_WAIT_SECS = 10.0


def probe_refusal(
    request: RouteProbe, agents: Container[str], channel: str | None, sender_running: bool
) -> Reply[ProbeReply] | None:
    """The reply when the probe cannot be sent at all; None when it can."""
    for alias in (request.from_, request.to):
        if alias not in agents:
            return Reply(
                ok=False,
                error="unknown_agent",
                message=f"no agent {alias!r} is configured",
                data=ProbeReply("unknown_agent"),
            )
    route = ProbeReply("", request.from_, request.to, channel)
    if channel is None:
        return _refused(route, "not_peers", "no channel is configured")
    if not sender_running:
        return _refused(route, "unavailable", f"agent {request.from_!r} is not running")
    return None


def _refused(route: ProbeReply, code: ControlErrorCode, message: str) -> Reply[ProbeReply]:
    return Reply(ok=False, error=code, message=message, data=_with(route, code))


def _with(
    route: ProbeReply, outcome: str, rtt_ms: float | None = None, detail: str | None = None
) -> ProbeReply:
    return ProbeReply(outcome, route.from_, route.to, route.channel, rtt_ms, detail)


class RouteProbeCommand:
    def __init__(self, router: Router, fleet: Fleet, wait_secs: float = PROBE_WAIT_SECS) -> None:
        self._router = router  # its policy: the running config's channels
        self._fleet = fleet
        self._wait_secs = wait_secs

    async def __call__(self, request: RouteProbe, exchange: Exchange) -> Reply[ProbeReply]:
        policy = self._router.policy
        channel = request.channel or (
            policy.default_channel(request.from_, request.to)
            if request.from_ in policy.agents and request.to in policy.agents
            else None
        )
        runner = self._fleet.runners.get(request.from_)
        running = runner is not None and runner.lifecycle.state == State.RUNNING
        refusal = probe_refusal(request, policy.agents, channel, running)
        if refusal is not None:
            return refusal
        # probe_refusal saw to both
        assert runner is not None
        assert channel is not None
        route = ProbeReply("", request.from_, request.to, channel)
        result = await runner.probe(request.to, channel, self._wait_secs)
        if result is None:
            return _refused(route, "timeout", f"no probe result within {self._wait_secs:g}s")
        data = _with(route, result.outcome, round(result.rtt_ms, 3), result.detail)
        if result.outcome == "delivered":
            return Reply(ok=True, data=data, message=result.detail or None)
        return Reply(
            ok=False,
            data=data,
            error=control_code(result.outcome),
            message=result.detail or None,
        )
