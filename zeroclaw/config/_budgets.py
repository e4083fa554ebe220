"""The keys of `[agents.<alias>.budget.origins]`: which outside origins a budget covers.
Pure (the config rules check them, the daemon's usage service looks them up).

    "<channel>:<sender>"   one sender of that channel ("webhook.ops:ci-bot")
    "<channel>:*"          each sender of that channel, on its own
    "<channel>"            every sender of that channel, together
    "peer:<alias>", "peer:*", "peer"   the same for agents that ask or delegate
    "*"                    each outside origin, on its own (when neither of the first two
                           keys names it)

`<channel>` is a configured channel key ("webhook.ops"); a sender is normalised as the
daemon normalises it (case-folded, blanks and a leading '@' dropped), so a key names the
sender however it spells itself.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from .._sender_names import normalize_sender

PEER = "peer"  # zeroclaw.bus.PEER_CHANNEL: a peer origin's channel (config does not load bus)
EVERY = "*"

BudgetForm = Literal["one", "each", "together"]


class BudgetKey(NamedTuple):
    form: BudgetForm
    channel: str  # "webhook.ops", "peer", or "*" (each outside origin)
    sender: str = ""  # `one`: the normalised sender


def parse_budget_key(key: str) -> BudgetKey | str:
    """The key's meaning, or what is wrong with it."""
    if key == EVERY:
        return BudgetKey("each", EVERY)
    channel, colon, sender = key.partition(":")
    if not channel or channel == EVERY:
        return f"{key!r} names no channel: '<channel>', '<channel>:*', '<channel>:<sender>' or '*'"
    if channel != PEER and "." not in channel:
        return f"{key!r}: a channel is named '<type>.<alias>' (e.g. 'webhook.ops') or 'peer'"
    if not colon:
        return BudgetKey("together", channel)
    if sender == EVERY:
        return BudgetKey("each", channel)
    normalised = normalize_sender(sender)
    if not normalised:
        return f"{key!r} names no sender after ':'"
    return BudgetKey("one", channel, normalised)
