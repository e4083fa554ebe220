"""What an agent and the daemon say to each other about discovered adapters (issue 15).

Agent -> daemon: requests to the `ADAPTER_SERVICE` service; the caller is the router's
authenticated identity, never a field here.
  op "admit"    body `AdapterCall`   -> `AdapterLease`: may this agent call it, for which
                                        capability, with approval or not; the program to run
                                        (the daemon counts the call in flight from here)
  op "release"  body `LeaseRelease`  -> nothing: the call ended (the daemon also releases
                                        every lease of an agent whose process is gone)
The agent runs the program itself, in its workspace, under its own sandbox: registered is not
authorised, and authorised runs no wider than the agent that asked.
"""

from __future__ import annotations

import msgspec

ADAPTER_SERVICE = "adapter"


class AdapterCall(msgspec.Struct, frozen=True, omit_defaults=True):
    adapter: str
    capability: str | None = None


class AdapterLease(msgspec.Struct, frozen=True):
    lease: str
    adapter: str
    capability: str
    side_effect: str
    needs_approval: bool
    command: str  # the canonical program
    args: tuple[str, ...]
    timeout_secs: float
    max_output_bytes: int


class LeaseRelease(msgspec.Struct, frozen=True):
    lease: str
