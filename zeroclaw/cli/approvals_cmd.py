"""`zeroclaw approvals list|approve|deny`: the operator's approval queue (ADR 0042).

A supervised action in a turn an outside sender (webhook, serial) started waits here, not
on the sender's channel, unless its peer group says `approvals = "sender"`. No answer by
its deadline is a denial.
"""

from __future__ import annotations

import click
import msgspec

from .._terminal import terminal_safe
from ..control import ApprovalApprove, ApprovalDecision, ApprovalDeny, ApprovalsList, Reply
from ._app import cli
from ._common import CliError, emit_json, json_option, wants_json
from .daemon_cmd import call


@cli.group("approvals")
def approvals_group() -> None:
    """Approvals of outside senders' turns, waiting for the operator; no answer denies."""


@approvals_group.command("list")
@json_option
def approvals_list(as_json: bool) -> None:
    """Pending approvals, oldest first, with the seconds left to answer each."""
    reply = call(ApprovalsList())
    if not reply.ok or reply.data is None:
        raise CliError(f"approvals list failed ({reply.error}): {reply.message}", code=reply.error)
    if wants_json(as_json):
        emit_json(msgspec.to_builtins(reply.data))
        return
    if not reply.data.approvals:
        click.echo("no approvals pending")
        return
    for a in reply.data.approvals:
        who = terminal_safe(f"{a.channel}:{a.sender}", one_line=True)
        what = terminal_safe(a.what, one_line=True)
        click.echo(f"{a.id}  {a.agent}  {who}  {a.expires_in_secs:.0f}s left  {what}")


def _decided(reply: Reply[ApprovalDecision], verb: str, as_json: bool) -> None:
    if not reply.ok or reply.data is None:
        raise CliError(f"{verb} failed ({reply.error}): {reply.message}", code=reply.error)
    if wants_json(as_json):
        emit_json({"ok": True, **msgspec.to_builtins(reply.data)})
        return
    click.echo(f"{reply.data.id}: {'approved' if reply.data.approved else 'denied'}")


@approvals_group.command("approve")
@click.argument("approval_id", metavar="ID")
@json_option
def approvals_approve(approval_id: str, as_json: bool) -> None:
    """Let the action of pending approval ID go ahead."""
    _decided(call(ApprovalApprove(approval_id)), "approve", as_json)


@approvals_group.command("deny")
@click.argument("approval_id", metavar="ID")
@json_option
def approvals_deny(approval_id: str, as_json: bool) -> None:
    """Refuse the action of pending approval ID."""
    _decided(call(ApprovalDeny(approval_id)), "deny", as_json)
