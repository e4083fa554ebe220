"""The router's refusal codes: why a frame or a question was not delivered. Core, so that
the control protocol (which the CLI loads without the bus and its zmq) passes them on by
naming this one list (issue 25: one list per family)."""

from __future__ import annotations

from typing import Literal, get_args

RefusalCode = Literal[
    "not_peers",
    "unknown_agent",
    "unavailable",
    "too_large",
    "malformed",
    "timeout",
    "delegation_not_allowed",  # a `delegate` to an agent outside the sender's `delegates`
    "depth_exceeded",  # a question the router counts MAX_DELEGATION_DEPTH deep or deeper
    "origin_not_allowed",  # an injected conversation whose origin the target does not accept
    "read_only_profile",  # a `delegate` from an agent whose risk profile is readonly
    "replayed",  # an ask/delegate whose message id its sender already used
    "budget_exceeded",  # a turn (a chat, a channel message, a peer's question) over a budget
]
REFUSAL_CODES: tuple[str, ...] = get_args(RefusalCode)
