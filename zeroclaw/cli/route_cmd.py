"""`zeroclaw route explain|probe`: what the router decides, and what really happens."""

from __future__ import annotations

import sys

import click

from ..bus import PeerPolicy
from ..control import ProbeReply, RouteProbe
from ._app import cli
from ._common import EXIT_FAILED, emit_json, json_option, state, wants_json
from .daemon_cmd import call


@cli.group("route")
def route_group() -> None:
    """Explain and probe agent-to-agent routing."""


def _options(f: click.decorators.FC) -> click.decorators.FC:
    f = click.option("--channel", metavar="CHANNEL", help="'<type>.<alias>'; default: any.")(f)
    f = click.option("--to", "dest", required=True, metavar="ALIAS", help="Destination agent.")(f)
    f = click.option("--from", "sender", required=True, metavar="ALIAS", help="Sending agent.")(f)
    return json_option(f)


@route_group.command("explain")
@_options
def explain_cmd(sender: str, dest: str, channel: str | None, as_json: bool) -> None:
    """The router's decision for FROM -> TO, from the config file. Exit 0 allowed, 1 denied."""
    _path, config = state().load()
    decision = PeerPolicy(config).decide(sender, dest, channel)
    if wants_json(as_json):
        emit_json(decision.as_json())
    else:
        verdict = "allowed" if decision.allowed else f"denied ({decision.code})"
        where = f" on {decision.channel}" if decision.channel else ""
        click.echo(f"{sender} -> {dest}{where}: {verdict}: {decision.reason}")
    sys.exit(0 if decision.allowed else EXIT_FAILED)


@route_group.command("probe")
@_options
def probe_cmd(sender: str, dest: str, channel: str | None, as_json: bool) -> None:
    """Make FROM's process send a probe to TO through the router. Exit 0 delivered, 1 not."""
    reply = call(RouteProbe(from_=sender, to=dest, channel=channel))
    probe = reply.data
    if wants_json(as_json):
        emit_json({"ok": reply.ok, **_probe_json(probe), "message": reply.message})
    elif reply.ok and probe is not None:
        click.echo(f"{sender} -> {dest} on {probe.channel}: delivered in {probe.rtt_ms:.3f} ms")
    else:
        outcome = probe.outcome if probe is not None else reply.error
        where = probe.channel if probe is not None else None
        click.echo(f"{sender} -> {dest} on {where}: {outcome}: {reply.message or ''}".rstrip(": "))
    sys.exit(0 if reply.ok else EXIT_FAILED)


def _probe_json(probe: ProbeReply | None) -> dict[str, object]:
    """The shape `route probe --json` has always printed: the route once both aliases are
    known (its channel null when there is none), the round trip once the agent answered."""
    if probe is None:
        return {}
    if probe.from_ is None:
        return {"outcome": probe.outcome}
    shape: dict[str, object] = {"from": probe.from_, "to": probe.to, "channel": probe.channel}
    shape["outcome"] = probe.outcome
    if probe.rtt_ms is not None:
        shape |= {"rtt_ms": probe.rtt_ms, "detail": probe.detail}
    return shape
