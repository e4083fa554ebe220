"""Where a conversation the daemon injects comes from: the router admits it by this.

The daemon's own sender name is DAEMON_SENDER: every injected message is `from` it (no
agent can be called that: "daemon" is a reserved alias), and the origin says who is
behind it: the local operator (channel "cli", no sender), or an external sender on a
webhook or serial channel.
"""

from __future__ import annotations

import msgspec

DAEMON_SENDER = "daemon"


class Origin(msgspec.Struct, frozen=True, omit_defaults=True):
    channel: str  # a channel key of the config: "cli", "cli.ops", "webhook.ops", "serial.bench"
    sender: str | None = None  # the external sender's id on that channel; None: the operator

    @property
    def is_operator(self) -> bool:
        return self.sender is None
