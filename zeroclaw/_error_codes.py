"""Every operator-facing error code set, by family: the one list the reference shows.

Each family is a `Literal` that mypy checks where its codes are produced; this module only
gathers them (`zeroclaw._reference` renders docs/reference/error-codes.md from them). It
loads the tools and memory packages when asked, so only tests and `make reference` import
it, never an agent process.
"""

from __future__ import annotations

from typing import NamedTuple, get_args


class Family(NamedTuple):
    title: str
    seen: str  # where an operator or a model meets these codes
    codes: tuple[str, ...]


def families() -> dict[str, Family]:
    """family -> its codes, in the order each Literal lists them."""
    from ._decode import DecodeErrorCode
    from .bus import RefusalCode
    from .channels import ChannelRefusalCode, WebhookErrorCode
    from .cli import CliErrorCode
    from .control import ControlErrorCode
    from .discovery import DiscoveryErrorKind, RegistrationReason
    from .gateway import GatewayErrorCode
    from .memory import MemoryErrorCode
    from .skills import SkillRefusal
    from .subagents import DispatchRefusalCode
    from .tools import SnapshotErrorCode, ToolErrorCode

    passed_on = {
        *get_args(RefusalCode),
        *get_args(MemoryErrorCode),
        *get_args(DecodeErrorCode),
        *get_args(DispatchRefusalCode),
    }

    return {
        "bus": Family(
            "Bus refusals",
            "an agent's send, `route probe`, a chat turn the router refuses",
            get_args(RefusalCode),
        ),
        "tool": Family(
            "Tool errors",
            "a tool result's `error_code` (the model sees it; `chat --json` shows it; the "
            "`subagent_` ones only a sub-agent's tools give)",
            get_args(ToolErrorCode) + get_args(SnapshotErrorCode),
        ),
        "memory": Family(
            "Memory",
            "`zeroclaw memory ...` (exit 2 for `bad_request`, `unknown_agent`), memory tools",
            get_args(MemoryErrorCode),
        ),
        "control": Family(
            "Control socket",
            "any CLI command's `--json` `error` (besides the bus, memory and dispatch codes it "
            "passes on)",
            tuple(c for c in get_args(ControlErrorCode) if c not in passed_on),
        ),
        "dispatch": Family(
            "Sub-agent dispatch",
            "a dispatch the daemon refuses before anything runs (`zeroclaw dispatch`: exit 2 for "
            "`subagent_not_found`, `subagent_input_invalid`, else 1)",
            get_args(DispatchRefusalCode),
        ),
        "channel": Family(
            "Channel routing",
            "a message a webhook or serial channel received that reached no agent (the webhook "
            "`error`, the serial `error` line; logged and counted by rule in `status`)",
            get_args(ChannelRefusalCode),
        ),
        "webhook": Family(
            "Webhook channel",
            "a webhook response's `error`, before routing (then the channel routing codes)",
            get_args(WebhookErrorCode),
        ),
        "gateway": Family(
            "Gateway API",
            "the `code` of an OpenAI error object the gateway's `/v1` answers (issue 29)",
            get_args(GatewayErrorCode),
        ),
        "discovery": Family(
            "Discovery decisions",
            "`zeroclaw discover ...`: each item's `decision.reason` (why it was registered, "
            "refused, shadowed or shown only)",
            get_args(RegistrationReason),
        ),
        "discovery_diagnostic": Family(
            "Discovery diagnostics",
            "`zeroclaw discover ...`: a diagnostic's `kind`, and `cache_locked` (exit 1) when "
            "another scan writes the cache",
            get_args(DiscoveryErrorKind),
        ),
        "skill": Family(
            "Skill refusals",
            "`config validate` (a warning per refused skill, its `code`), and the daemon's "
            "start or reload, which a refused skill refuses (exit 2)",
            get_args(SkillRefusal),
        ),
        "cli": Family(
            "Command line",
            "any CLI command's `--json` failure, `{ok: false, error: {code, message}}` "
            "(exit 2 for `usage` and `config_*`, 3 for `daemon_unreachable`, "
            "`daemon_refused`, 130 for `interrupted`, else 1)",
            get_args(CliErrorCode),
        ),
        "decode": Family(
            "Undecodable input",
            "any socket or stream reading untrusted bytes (ADR 0014)",
            get_args(DecodeErrorCode),
        ),
    }
