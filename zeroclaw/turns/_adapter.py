"""What an agent and the daemon say to each other about discovered adapters (issue 15).

Agent -> daemon: requests to the `ADAPTER_SERVICE` service; the caller is the router's
authenticated identity, never a field here.
  op "admit"   body `AdapterCall`    -> `AdapterAdmission`: may this agent call it, for
                                        which capability, and must the operator approve
  op "invoke"  body `AdapterInvoke`  -> `AdapterResult` once the program ended (admitted
                                        again: the registry or the config may have changed)
The daemon runs the program in the agent's workspace under a Landlock ruleset built from the
agent's own path rules (its sandbox, not the daemon's), so an adapter discovered after the
agent started needs no wider sandbox for the agent process itself, and a removed adapter's
calls in flight are counted where they run. An HTTP adapter (or an MCP server over HTTP)
is reached by the daemon too (ADR 0054): only at an endpoint the calling agent's risk
profile lists in `allowed_endpoints`, its credential read from the daemon's environment
and never the agent's.
"""

from __future__ import annotations

import hashlib
from typing import Literal

import msgspec

from .._ops import Operation

ADAPTER_SERVICE = "adapter"

# Why the adapter service refuses a call (the tools pass these on as tool errors).
AdapterRefusalCode = Literal[
    "adapter_not_found",  # nothing registered under that id (or it is draining)
    "adapter_not_granted",  # the agent's [agents.<alias>] adapters does not list it
    "adapter_unsupported",  # a kind that is registered but never run (a workflow skill)
    "capability_not_offered",  # the adapter does not offer the capability asked for
    "read_only_profile",  # a readonly agent and a capability with side effects
    "bad_arguments",  # several capabilities and none named
    "capability_not_routable",  # no adapter named, and the capability may not be auto-routed
    "no_adapter_for_capability",  # no adapter named, and none the agent may call offers it
    # HTTP adapters and MCP servers over HTTP (ADR 0054), refused before any connection:
    "endpoint_not_allowed",  # the caller's risk profile does not list it in allowed_endpoints
    "endpoint_invalid",  # endpoint_env is unset, or not an http(s) URL without credentials
    "api_key_missing",  # the daemon's environment does not set the api_key_env variable
]

# How an HTTP adapter's request that was made ended, when it did not end well (ADR 0054).
HttpAdapterErrorCode = Literal[
    "http_status",  # the reply's status is not 2xx (`status` says which; redirects included)
    "http_timeout",  # no whole reply within the adapter's timeout_ms
    "http_unavailable",  # no reply: the connection was refused, failed or broke
    "http_bad_reply",  # a reply the daemon does not read (a content encoding it did not ask)
]


class AdapterCall(msgspec.Struct, frozen=True, omit_defaults=True):
    """`tool`: for a registered MCP server, the tool to call (capability mcp.tool.call).
    `adapter` empty: the daemon picks one for `capability` (a business alias, or a
    side-effect-free capability routed by source priority)."""

    adapter: str
    capability: str | None = None
    tool: str | None = None


class AdapterAdmission(msgspec.Struct, frozen=True):
    adapter: str
    capability: str
    side_effect: str
    needs_approval: bool
    # what runs, for the approval question: the canonical program, or an HTTP adapter's
    # `POST <endpoint>` (an MCP server over HTTP: its endpoint), never with a query
    command: str
    tool: str = ""  # an MCP server's tool


class AdapterInvoke(msgspec.Struct, frozen=True, omit_defaults=True):
    """`turn`: the asking turn's id. A capability that needs approval runs only when the
    daemon's turn service saw that turn's approval question (`adapter_approval_question`)
    answered yes: the daemon's own record, never a flag of the agent's (ADR 0052)."""

    adapter: str
    input: str  # a CLI adapter's last argument; an MCP tool's arguments as a JSON object
    capability: str | None = None
    turn: str | None = None
    tool: str | None = None


APPROVAL_INPUT_CHARS = 120  # of the input, shown in the question; its digest names it all


def adapter_approval_question(admission: AdapterAdmission, input: str) -> str:
    """The approval question for one run with this input: the tool asks it, the daemon
    looks it up, so a yes covers this program with this input only. Bounded whatever the
    input's size: its start is shown (as a repr, so no control character reaches the
    operator's terminal) and its sha256 names all of it."""
    shown = input if len(input) <= APPROVAL_INPUT_CHARS else input[:APPROVAL_INPUT_CHARS] + "…"
    digest = hashlib.sha256(input.encode(errors="surrogatepass")).hexdigest()[:16]
    what = f" tool {admission.tool}" if admission.tool else ""
    return (
        f"run adapter {admission.adapter}{what} for {admission.capability} "
        f"(side effect: {admission.side_effect}): {admission.command} "
        f"with input {shown!r} (sha256 {digest})"
    )


class AdapterResult(msgspec.Struct, frozen=True, omit_defaults=True):
    """How a run ended. A CLI adapter's: its exit code. An MCP tool's: `exit_code` 0 when
    the server answered, `error` an McpErrorCode when it did not (or answered isError). An
    HTTP adapter's: `exit_code` 0 and the reply for a 2xx, else `error` an
    HttpAdapterErrorCode, with the reply's `status` when one came."""

    adapter: str
    capability: str
    exit_code: int | None  # None: killed on its timeout
    output: str = ""
    truncated: bool = False
    timed_out: bool = False
    error: str = ""
    retryable: bool = False
    status: int = 0  # an HTTP adapter's reply status (0: no reply, or not HTTP)
    detail: str = ""  # a failure's words for people (never a credential)


# The codes of a failed or refused adapter call worth trying again unchanged: the program
# or server was slow or not there at that moment. Everything else (policy, arguments, the
# tool's own error) fails the same way again. An HTTP adapter's `http_status` depends on the
# status (`http_status_retryable`).
RETRYABLE_CODES = frozenset(
    {
        "timeout",
        "mcp_timeout",
        "mcp_unavailable",
        "http_timeout",
        "http_unavailable",
        "internal_error",
    }
)


def adapter_retryable(code: str | None, status: int = 0) -> bool:
    """Whether an adapter call that failed with `code` (an HTTP reply's `status`) may
    succeed if asked again."""
    if code == "http_status":
        return http_status_retryable(status)
    return code in RETRYABLE_CODES


def http_status_retryable(status: int) -> bool:
    """A reply status worth asking again for: 429 (too many requests) and 5xx (the server
    failed, or is unavailable for now). Any other 4xx, and a redirect (never followed),
    fails the same way again."""
    return status == 429 or 500 <= status <= 599


# The adapter service's operations. Refusal codes: the registry's
# (zeroclaw.discovery.AdapterRefusalCode), "approval_denied", "exec_refused",
# "bad_request" and "internal_error"; a run's own failure is in its result (`error`).
ADAPTER_ADMIT = Operation(ADAPTER_SERVICE, "admit", AdapterCall, AdapterAdmission)
ADAPTER_INVOKE = Operation(ADAPTER_SERVICE, "invoke", AdapterInvoke, AdapterResult)
ADAPTER_OPERATIONS = (ADAPTER_ADMIT, ADAPTER_INVOKE)
