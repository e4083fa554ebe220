"""How deep a chain of asks/delegations may go: one number for the router, which refuses a
question this deep (`depth_exceeded`), and for the agent's peer tools, which say so before
asking. Core, so that the tools reach no bus to read it (ADR 0049)."""

from __future__ import annotations

# The depth is the router's count (ADR 0018), stamped on the delivered message; the tools'
# check only spares an honest agent the trip.
MAX_DELEGATION_DEPTH = 3
