"""`zeroclaw route explain|probe`: what the router decides, and what really happens."""

from __future__ import annotations

import sys

import click

from ..bus import PeerPolicy
from ..control import RouteProbe
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
    data = reply.data or {}
    if wants_json(as_json):
        emit_json({"ok": reply.ok, **data, "message": reply.message})
    elif reply.ok:
        click.echo(
            f"{sender} -> {dest} on {data.get('channel')}: delivered in {data['rtt_ms']:.3f} ms"
        )
    else:
        outcome = data.get("outcome", reply.error)
        click.echo(
            f"{sender} -> {dest} on {data.get('channel')}: {outcome}: {reply.message or ''}".rstrip(
                ": "
            )
        )
    sys.exit(0 if reply.ok else EXIT_FAILED)
