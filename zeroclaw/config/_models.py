"""Pydantic models of the TOML file, one per table of SPEC §3.

These models check shape and value ranges of each entry on its own. Rules that span
entries (references, aliases, peer-group bindings, shared workspaces) live in
`_rules.py`, so every entry can be validated alone and all errors reported at once.
"""

from __future__ import annotations

import codecs
import ipaddress
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class _Strict(BaseModel):
    """Base for every table: unknown keys are errors, inf/nan are refused, models are frozen."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
        str_strip_whitespace=False,
        validate_default=False,
    )


def _check_env_var_name(value: str) -> str:
    # Deliberately never echo the value: a common mistake is pasting the secret itself here.
    if not ENV_VAR_NAME.match(value):
        raise ValueError(
            "must name an environment variable (letters, digits and '_', not starting with a "
            "digit); put the secret itself in the environment, never in this file"
        )
    return value


def _check_host_port(value: str) -> str:
    """`value` is `host:port` (a listener's address); its host."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("must be 'host:port' with a port between 1 and 65535")
    return host


def _check_http_url(value: str) -> str:
    if not re.match(r"^https?://[^\s/]+", value):
        raise ValueError("must be an http:// or https:// URL")
    return value


def _resolve_path(value: Path, info: ValidationInfo) -> Path:
    """Relative paths are relative to the config file's directory (passed as context)."""
    if "\x00" in str(value):
        raise ValueError("must not contain a NUL byte")
    try:
        value = value.expanduser()
    except RuntimeError:  # "~name" of a user this machine does not have
        raise ValueError(f"cannot expand {str(value).split('/')[0]!r}: no such user") from None
    base = (info.context or {}).get("base_dir")
    if not value.is_absolute() and base is not None:
        value = Path(base) / value
    # normpath, not resolve(): no I/O at load time; symlinks are checked where paths are used.
    return Path(os.path.normpath(value))


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: object) -> object:
    """'90s', '15m', '1h30m', '2d', '500ms' (or a number of seconds) -> seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration is a string such as '15m' or a number of seconds")
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return value  # pydantic says what it is not
    text = value.strip().lower()
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(
            f"{value[:40]!r} is not a duration: a number and a unit (ms, s, m, h, d), "
            "several may follow one another, e.g. '90s', '15m', '1h30m'"
        )
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


EnvVarName = Annotated[str, AfterValidator(_check_env_var_name)]
Duration = Annotated[float, BeforeValidator(parse_duration)]
HttpUrl = Annotated[str, AfterValidator(_check_http_url)]
ConfigPath = Annotated[Path, AfterValidator(_resolve_path)]
Seconds = Annotated[float, Field(gt=0, le=86_400 * 7)]


# --------------------------------------------------------------------------- HTTP listeners


class HttpLimits(_Strict):
    """What an outside client may hold of one HTTP listener (ADR 0045). Every HTTP listener
    of the daemon has a table of this model: the conformance table finds them by it."""

    header_timeout_secs: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=10.0,
        description="Seconds a client has for a request's whole header block, from its first "
        "byte (not per byte: a client trickling one byte a second is cut all the same).",
    )
    body_timeout_secs: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=30.0,
        description="Seconds a client has for the whole request body once the headers are "
        "in; then it gets 408 and the connection is closed. Also bounds each write of the "
        "answer to a client that does not read it.",
    )
    idle_timeout_secs: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=5.0,
        description="Seconds a kept-alive connection may wait, idle, for its next request.",
    )
    max_connections: Annotated[int, Field(ge=1, le=65536)] = Field(
        default=256,
        description="Connections served at once; one more is closed at once (counted in "
        "zeroclaw_http_connections_cut_total). Whatever this says, a listener stops "
        "admitting while the daemon's descriptors are low (a reserve is kept for the "
        "control socket).",
    )


# --------------------------------------------------------------------------- daemon


class ControlLimits(_Strict):
    """How many connections the control socket serves at once (ADR 0011, 0069). Each is
    one of the daemon's descriptors and a few kilobytes; a `zeroclaw chat` session holds
    one for as long as it is open, a program driving many turns at once holds one per turn
    in flight. Beyond these, `status`, `agents list` and `stop` still get one of 4 reserved
    connections."""

    max_connections: Annotated[int, Field(ge=1, le=65536)] = Field(
        default=256,
        description="Connections served at once; when they are all taken, the oldest idle "
        "one (no request running, no chat session open) is closed to make room, and with "
        "none idle the new one is refused 'busy'.",
    )
    max_per_process: Annotated[int, Field(ge=1, le=65536)] = Field(
        default=64,
        description="Connections one client process may hold (its own oldest idle one makes "
        "room for its next): one runaway script cannot take them all. Raise it for a "
        "program that runs more turns at once over the control socket (at most "
        "max_connections apply).",
    )


class DaemonConfig(_Strict):
    state_dir: ConfigPath | None = Field(
        default=None,
        description="Directory for persistent state (memory, sessions, default workspaces). "
        "Default: $STATE_DIRECTORY, else $XDG_STATE_HOME/zeroclaw, else ~/.local/state/zeroclaw.",
    )
    runtime_dir: ConfigPath | None = Field(
        default=None,
        description="Directory for the control socket, router socket and lock file. "
        "Default: $RUNTIME_DIRECTORY, else $XDG_RUNTIME_DIR/zeroclaw, else <state_dir>/run.",
    )
    shutdown_grace_secs: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=10.0,
        description="Seconds an agent gets between SIGTERM and SIGKILL when it is stopped.",
    )
    log_format: Literal["auto", "text", "json"] = Field(
        default="auto",
        description="Log format: 'json' lines (journald-friendly), readable 'text', or 'auto' "
        "(text on a TTY, json otherwise).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Minimum level of log records the daemon writes."
    )
    max_frame_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = Field(
        default=1024 * 1024,
        description="Largest message the router accepts, in bytes; larger frames are refused "
        "as 'too_large'.",
    )
    memory_map_size: Annotated[int, Field(ge=64 * 1024, le=1 << 44)] = Field(
        default=1 << 30,
        description="Initial size in bytes of the memory database's address space; it doubles "
        "whenever it fills, so this is a starting point, not a limit.",
    )
    delivery_timeout_secs: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=30.0,
        description="Seconds the router waits for the destination's ack before refusing the "
        "message to its sender as 'timeout'.",
    )
    metrics_allow_remote: bool = Field(
        default=False,
        description="Let `metrics_listen` name a non-loopback address; without it only "
        "loopback (127.0.0.0/8, ::1, localhost) is accepted.",
    )
    metrics_listen: str | None = Field(
        default=None,
        description="host:port where the daemon serves Prometheus metrics over HTTP "
        "(GET /metrics), e.g. '127.0.0.1:9464'; off when unset (`zeroclaw metrics` prints "
        "them all the same). Loopback only unless metrics_allow_remote.",
    )

    metrics_token_env: EnvVarName | None = Field(
        default=None,
        description="Name of the environment variable holding the bearer token a scrape of "
        "`metrics_listen` must send (`Authorization: Bearer <token>`); required with "
        "metrics_listen. Agents never get it: their environment is an allowlist.",
    )
    metrics_limits: HttpLimits = Field(
        default_factory=HttpLimits,
        description="Timeouts and connection cap of the metrics listener.",
    )
    control_limits: ControlLimits = Field(
        default_factory=ControlLimits,
        description="How many connections the control socket serves (the operator's CLI "
        "and programs on this host); a reload applies them to the next connection.",
    )

    @model_validator(mode="after")
    def _metrics_need_a_token(self) -> DaemonConfig:
        if self.metrics_listen is not None and self.metrics_token_env is None:
            raise ValueError(
                "metrics_listen needs metrics_token_env: the metrics name every agent, "
                "channel and sub-agent, so a scrape must send a bearer token"
            )
        return self

    @field_validator("metrics_listen")
    @classmethod
    def _metrics_host_port(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        host = _check_host_port(value)
        bare = host.removeprefix("[").removesuffix("]")
        if bare != "localhost":
            try:
                loopback = ipaddress.ip_address(bare).is_loopback
            except ValueError:  # a host name: it may resolve anywhere
                loopback = False
            if not loopback and not info.data.get("metrics_allow_remote", False):
                raise ValueError(
                    f"{value!r} is not a loopback address; metrics tell about every agent, "
                    "so set metrics_allow_remote = true to serve them to other hosts"
                )
        return value


# --------------------------------------------------------------------------- providers

# An amount of money (a price per million tokens, a daily budget) in the unit the operator
# prices in: at most six decimals, so every cost is an exact integer (ADR 0057).
Money = Annotated[Decimal, Field(ge=0, le=1_000_000, decimal_places=6)]


class Price(_Strict):
    input_per_mtok: Money = Field(
        default=Decimal(0), description="Price of one million input tokens (not cached)."
    )
    output_per_mtok: Money = Field(
        default=Decimal(0), description="Price of one million output tokens."
    )
    cached_input_per_mtok: Money | None = Field(
        default=None,
        description="Price of one million input tokens read from the provider's prompt cache "
        "(OpenAI cached_tokens, Anthropic cache_read_input_tokens); default: the input price.",
    )
    cache_write_per_mtok: Money | None = Field(
        default=None,
        description="Price of one million input tokens written to the prompt cache "
        "(Anthropic cache_creation_input_tokens); default: the input price.",
    )


class _Priced(_Strict):
    price: Price | None = Field(
        default=None,
        description="What its tokens cost, per million, in the currency of your choice (one "
        "for every provider): the daemon's usage ledger and cost_per_day budgets count with "
        "it. Default: free (tokens are still counted).",
    )


class _ProviderBase(_Priced):
    timeout_secs: Seconds = Field(
        default=60.0,
        description="Seconds to wait for the server's next bytes (the answer's start, each "
        "piece of it; at most 10 to connect) before giving up on the request.",
    )
    answer_timeout_secs: Seconds = Field(
        default=600.0,
        description="Seconds one model request may take in all, from sending it to the "
        "answer's last byte, its retries included: an answer that trickles in, each piece "
        "within timeout_secs, is cut all the same (a timeout, as a chain counts it).",
    )
    max_retries: Annotated[int, Field(ge=0, le=20)] = Field(
        default=3, description="Retries, with exponential backoff, on HTTP 429 and 5xx answers."
    )
    breaker_failures: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=3,
        description="In a fallback chain (model_provider as a list): consecutive failures "
        "(connection, timeout, HTTP 429 or 5xx, each after its retries) after which the chain "
        "skips this provider for breaker_open_secs; then one call tries it again.",
    )
    breaker_open_secs: Annotated[float, Field(gt=0, le=86_400)] = Field(
        default=30.0,
        description="How long a chain skips this provider once its breaker opened; each "
        "failed trial doubles it, up to ten times this.",
    )


class OfflineProvider(_Priced):
    """The built-in deterministic provider: no network; a price only to rehearse budgets."""


class OpenAIProvider(_ProviderBase):
    base_url: HttpUrl = Field(
        default="https://api.openai.com/v1",
        description="Base URL of an OpenAI-compatible chat completions API "
        "(Ollama, vLLM, llama.cpp server, OpenRouter).",
    )
    model: str = Field(min_length=1, max_length=256, description="Model name sent with requests.")
    api_key_env: EnvVarName | None = Field(
        default=None,
        description="Name of the environment variable holding the API key; omit for local "
        "servers that need none. The key itself never goes in this file.",
    )
    stream_usage: bool = Field(
        default=True,
        description="Ask for the token usage of a streamed answer (stream_options."
        "include_usage: the server sends it in a last chunk). Turn off for a server that "
        "refuses the field; the turn then estimates its tokens (four characters to one).",
    )


class AnthropicProvider(_ProviderBase):
    base_url: HttpUrl = Field(
        default="https://api.anthropic.com", description="Base URL of the Anthropic Messages API."
    )
    model: str = Field(min_length=1, max_length=256, description="Model name sent with requests.")
    api_key_env: EnvVarName = Field(
        default="ANTHROPIC_API_KEY",
        description="Name of the environment variable holding the API key.",
    )
    max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=1024, description="Upper bound on tokens in one answer."
    )


class ProvidersTable(_Strict):
    offline: dict[str, OfflineProvider] = Field(
        default_factory=dict,
        description="Built-in offline providers, referenced as 'offline.<alias>'.",
    )
    openai: dict[str, OpenAIProvider] = Field(
        default_factory=dict,
        description="OpenAI-compatible providers, referenced as 'openai.<alias>'.",
    )
    anthropic: dict[str, AnthropicProvider] = Field(
        default_factory=dict,
        description="Anthropic Messages API providers, referenced as 'anthropic.<alias>'.",
    )


ProviderConfig = OfflineProvider | OpenAIProvider | AnthropicProvider


# --------------------------------------------------------------------------- risk profiles

RiskLevel = Literal["readonly", "supervised", "full"]

DEFAULT_FORBIDDEN_PATHS = (
    "/etc",
    "/proc",
    "/sys",
    "/boot",
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.config",
)


class ReminderGrant(_Strict):
    """The reminder tools a risk profile grants (issue 28), and their bounds per agent."""

    max_per_agent: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=16,
        description="Reminders one agent may hold at once; schedule_create beyond it is "
        "refused `reminder_limit`.",
    )
    max_per_channel: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=4,
        description="Reminders the outside senders of one channel hold together on one agent "
        "(a sender that changes its name holds no more), so a channel's senders cannot take "
        "the operator's room; beyond it schedule_create is refused `reminder_limit`.",
    )
    min_interval: Annotated[Duration, Field(ge=60, le=86_400 * 366)] = Field(
        default=300.0,
        description="The shortest interval (and the soonest one-shot delay, less the "
        "grace) a reminder may have, e.g. '5m'; a shorter one is refused "
        "`reminder_too_frequent`. At least one minute.",
    )


class RiskProfile(_Strict):
    level: RiskLevel = Field(
        description="'readonly' refuses writes and shell; 'supervised' asks approval for "
        "medium-risk actions; 'full' lifts the workspace-only rule (forbidden paths still hold)."
    )
    workspace_only: bool = Field(
        default=True,
        description="Confine file tools to the agent's workspace (plus 'access' grants).",
    )
    allowed_commands: tuple[Annotated[str, Field(min_length=1, max_length=255)], ...] = Field(
        default=(),
        description="Program names the shell tool may run; everything else is refused.",
    )
    forbidden_paths: tuple[Annotated[str, Field(min_length=1, max_length=4096)], ...] = Field(
        default=DEFAULT_FORBIDDEN_PATHS,
        description="Paths no tool may touch, whatever the level; '~' is the daemon user's home.",
    )
    require_approval_for_medium_risk: bool = Field(
        default=True,
        description="With level 'supervised': ask the operator before medium-risk actions.",
    )
    block_high_risk_commands: bool = Field(
        default=True, description="Refuse high-risk shell commands even when allowlisted."
    )
    sandbox: Literal["auto", "landlock", "none"] = Field(
        default="auto",
        description="OS sandbox: 'landlock' requires it, 'auto' uses it when the kernel has "
        "it, 'none' disables it.",
    )
    approval_timeout_secs: Annotated[float, Field(gt=0, le=86_400)] = Field(
        default=120.0,
        description="How long a supervised action waits for a yes on the channel that "
        "started the turn; no answer in time is a denial.",
    )
    reminders: ReminderGrant | None = Field(
        default=None,
        description="Give this profile's agents the reminder tools (schedule_create, "
        "schedule_list, schedule_delete): schedules they make themselves, bounded per agent. "
        "A supervised agent's schedule_create asks approval on the channel that started the "
        "turn. Absent: no reminder tools. Not for a readonly profile.",
    )
    allowed_endpoints: tuple[str, ...] = Field(
        default=(),
        description="'host:port' endpoints this profile's agents may reach besides their "
        "provider: the streamable-HTTP MCP servers they use, and the HTTP adapters (and MCP "
        "servers over HTTP) the daemon calls for them (each must be listed here). "
        "Default: none.",
    )

    @field_validator("allowed_endpoints")
    @classmethod
    def _endpoints(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for endpoint in value:
            host, sep, port = endpoint.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{endpoint!r} is not 'host:port'")
        return _listed_once(value)

    @field_validator("allowed_commands")
    @classmethod
    def _bare_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if "/" in name or name.strip() != name or not name.isprintable():
                raise ValueError(
                    f"{name!r} must be a bare program name without '/' or spaces; "
                    "the shell tool finds it on the daemon's PATH"
                )
        return value


# --------------------------------------------------------------------------- runtime profiles


class RestartPolicy(_Strict):
    max_restarts: Annotated[int, Field(ge=0, le=10_000)] = Field(
        default=5,
        description="Failures tolerated inside 'window_secs'; one more puts the agent in 'fatal'.",
    )
    window_secs: Seconds = Field(
        default=60.0, description="Sliding window over which failures are counted."
    )
    backoff_initial_secs: Seconds = Field(
        default=1.0, description="Delay before the first restart after a failure."
    )
    backoff_max_secs: Seconds = Field(
        default=60.0, description="Upper bound of the doubling restart delay."
    )
    stable_after_secs: Annotated[float, Field(ge=0, le=86_400)] = Field(
        default=10.0,
        description="A run shorter than this counts as a failure; a longer one resets the backoff.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> RestartPolicy:
        if self.backoff_max_secs < self.backoff_initial_secs:
            raise ValueError("backoff_max_secs must be at least backoff_initial_secs")
        return self


class RuntimeProfile(_Strict):
    max_tool_iterations: Annotated[int, Field(ge=1, le=100)] = Field(
        default=8, description="Most tool calls the model may make in one turn."
    )
    max_actions_per_hour: Annotated[int, Field(ge=0, le=1_000_000)] = Field(
        default=60, description="Most tool actions per rolling hour; 0 forbids tools entirely."
    )
    shell_timeout_secs: Seconds = Field(
        default=30.0, description="Seconds one shell command may run before it is killed."
    )
    activation: Literal["always", "on-demand"] = Field(
        default="always",
        description="'always' starts with the daemon; 'on-demand' starts at the first message.",
    )
    idle_stop_secs: Seconds = Field(
        default=600.0, description="An on-demand agent idle this long is stopped."
    )
    restart: RestartPolicy = Field(
        default_factory=RestartPolicy, description="Restart policy when the agent process exits."
    )


# --------------------------------------------------------------------------- channels


class CliChannel(_Strict):
    """Sessions opened by `zeroclaw chat` over the control socket; no settings."""


class WebhookChannel(_Strict):
    listen: str = Field(
        description="host:port the HTTP listener binds, e.g. '127.0.0.1:8787'.",
    )
    secret_env: EnvVarName = Field(
        description="Name of the environment variable holding the HMAC-SHA256 signing secret."
    )
    rate_limit_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=60, description="Requests accepted per minute per sender before 429."
    )
    max_body_bytes: Annotated[int, Field(ge=1, le=64 * 1024 * 1024)] = Field(
        default=256 * 1024, description="Largest request body accepted."
    )
    allow_remote: bool = Field(
        default=False,
        description="Let `listen` name a non-loopback address; without it only loopback "
        "(127.0.0.0/8, ::1, localhost) is accepted; the same holds for `callback_url`.",
    )
    callback_url: HttpUrl | None = Field(
        default=None,
        description="Where replies are POSTed, signed like requests: a message then answers "
        "202 with its message_id at once. Loopback only unless allow_remote.",
    )
    callback_max_attempts: Annotated[int, Field(ge=1, le=20)] = Field(
        default=5,
        description="Attempts to deliver one callback (backoff 1 s doubling, at most 60 s) "
        "on connection errors, timeouts, 429 and 5xx.",
    )
    limits: HttpLimits = Field(
        default_factory=HttpLimits,
        description="Timeouts and connection cap of this channel's HTTP listener; channels "
        "sharing one `listen` address share a listener, which takes the strictest of each.",
    )

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str) -> str:
        _check_host_port(value)
        return value


class SerialChannel(_Strict):
    port: str = Field(min_length=1, max_length=4096, description="Serial device path.")
    baud: Literal[1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600] = (
        Field(default=115200, description="Line speed in bits per second.")
    )
    newline: Literal["\n", "\r\n"] = Field(
        default="\n",
        description="What ends each line written to the device; input lines end with either.",
    )
    max_line_bytes: Annotated[int, Field(ge=16, le=16 * 1024 * 1024)] = Field(
        default=4096,
        description="Longest input line; a longer one is dropped up to its newline, with an "
        "error line written back.",
    )
    encoding: str = Field(
        default="utf-8",
        min_length=1,
        max_length=64,
        description="Text encoding of the line; undecodable bytes are replaced, not fatal.",
    )

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, value: str) -> str:
        try:
            info = codecs.lookup(value)
        except LookupError:
            raise ValueError(f"unknown text encoding {value!r}") from None
        if not getattr(info, "_is_text_encoding", True):
            raise ValueError(f"{value!r} is not a text encoding")
        return value


class TelegramChannel(_Strict):
    token_env: EnvVarName = Field(
        description="Name of the environment variable holding the bot's token (from "
        "@BotFather); read from the daemon's environment, never logged."
    )
    api_url: HttpUrl = Field(
        default="https://api.telegram.org",
        description="The Bot API's base URL; plain http only to loopback (a local Bot API "
        "server or a test's).",
    )
    approvers: tuple[Annotated[int, Field(ge=1)], ...] = Field(
        default=(),
        description="Telegram user ids who may press Approve/Deny on an approval this channel "
        "asks (peer groups with approvals = 'sender'); nobody else can. Empty: such an "
        "approval is denied.",
    )
    rate_limit_per_minute: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=20, description="Messages taken per minute per sender; more get a one-line answer."
    )
    poll_timeout_secs: Annotated[int, Field(ge=0, le=50)] = Field(
        default=30, description="How long one getUpdates long poll waits for an update."
    )
    edit_interval_secs: Annotated[float, Field(ge=0.05, le=60)] = Field(
        default=1.5,
        description="Least time between two edits of a streamed reply (Telegram's flood "
        "control counts them).",
    )
    stream: bool = Field(
        default=True,
        description="Show the reply as it is written, by editing one message; false: send it "
        "once the turn ends.",
    )
    mode: Literal["poll", "webhook"] = Field(
        default="poll",
        description="How updates arrive: 'poll' (getUpdates long polling) or 'webhook' "
        "(Telegram POSTs them to the gateway's /telegram/<alias>; needs [gateway] and "
        "webhook_url).",
    )
    webhook_url: HttpUrl | None = Field(
        default=None,
        description="Webhook mode: the public https URL at which Telegram reaches the "
        "gateway's /telegram/<alias> (its path must end so); plain http only to loopback.",
    )


class MatrixChannel(_Strict):
    """One Matrix account the daemon syncs as (issue 30, ADR 0066): its senders are Matrix
    user ids, admitted by the peer groups on `matrix.<alias>` like any channel's."""

    homeserver: HttpUrl = Field(
        description="The homeserver's client-server API base URL, e.g. "
        "'https://matrix.example.org'; https unless on loopback.",
    )
    user_id: str = Field(
        pattern=r"^@[^:\s]+:\S+$",
        max_length=255,
        description="The account the daemon acts as, a full Matrix user id '@bot:example.org'.",
    )
    access_token_env: EnvVarName | None = Field(
        default=None,
        description="Name of the environment variable holding the account's access token; "
        "exactly one of this and password_env.",
    )
    password_env: EnvVarName | None = Field(
        default=None,
        description="Name of the environment variable holding the account's password: the "
        "daemon logs in with it (as device_id) at each start; exactly one of this and "
        "access_token_env.",
    )
    device_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="The device the daemon logs in as (password login keeps one device "
        "across restarts); with an access token, the token's own device.",
    )
    approvers: list[str] = Field(
        default_factory=list,
        description="Matrix user ids whose reply 'approve <id>' / 'deny <id>' answers an "
        "approval asked in a room (when the sender's groups say approvals = 'sender'); "
        "anyone else's reply is refused.",
    )
    rate_limit_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=20, description="Messages accepted per minute per sender; more are refused."
    )
    edit_interval_secs: Annotated[float, Field(ge=0.2, le=60.0)] = Field(
        default=1.0,
        description="Least time between two edits of a streamed reply (m.replace).",
    )
    sync_timeout_secs: Annotated[float, Field(ge=0.0, le=120.0)] = Field(
        default=30.0, description="How long one /sync long-poll waits for new events."
    )

    @model_validator(mode="after")
    def _one_credential(self) -> MatrixChannel:
        if (self.access_token_env is None) == (self.password_env is None):
            raise ValueError("set exactly one of access_token_env and password_env")
        return self


class ChannelsTable(_Strict):
    cli: dict[str, CliChannel] = Field(
        default_factory=dict, description="CLI chat channels, referenced as 'cli.<alias>'."
    )
    webhook: dict[str, WebhookChannel] = Field(
        default_factory=dict, description="HTTP webhook channels, referenced as 'webhook.<alias>'."
    )
    serial: dict[str, SerialChannel] = Field(
        default_factory=dict, description="Serial line channels, referenced as 'serial.<alias>'."
    )
    telegram: dict[str, TelegramChannel] = Field(
        default_factory=dict,
        description="Telegram bots (Bot API long polling), referenced as 'telegram.<alias>'.",
    )
    matrix: dict[str, MatrixChannel] = Field(
        default_factory=dict, description="Matrix accounts, referenced as 'matrix.<alias>'."
    )


ChannelConfig = CliChannel | WebhookChannel | SerialChannel | TelegramChannel | MatrixChannel

# --------------------------------------------------------------------------- agents

AccessMode = Literal["read", "write", "read_write"]


class WorkspaceConfig(_Strict):
    path: ConfigPath | None = Field(
        default=None,
        description="The agent's workspace root; relative to this file. "
        "Default: <state_dir>/agents/<alias>/workspace.",
    )
    unrestricted_filesystem: bool = Field(
        default=False,
        description="Lift the workspace-only rule for this agent (forbidden paths still hold).",
    )
    access: dict[str, AccessMode] = Field(
        default_factory=dict,
        description="Outbound grants to other agents' workspaces: alias = read | write | "
        "read_write.",
    )


_MIB = 1 << 20


class MemoryConfig(_Strict):
    """Grants over other agents' memory, and this agent's quotas (ADR 0046; the defaults
    are zeroclaw.memory.DEFAULT_QUOTA's, a test keeps them in step)."""

    read_memory_from: tuple[str, ...] = Field(
        default=(),
        description="Other agents whose memory this agent may recall from (read-only).",
    )
    max_records: Annotated[int, Field(ge=1, le=10_000_000)] = Field(
        default=10_000,
        description="Records this agent's memory holds at most; a store past it is refused "
        "`quota_exceeded`.",
    )
    max_bytes: Annotated[int, Field(ge=1024, le=1 << 40)] = Field(
        default=64 * _MIB,
        description="Bytes (UTF-8 keys and contents) of this agent's records at most; a store "
        "past it is refused `quota_exceeded`.",
    )
    max_session_turns: Annotated[int, Field(ge=2, le=1_000_000)] = Field(
        default=400,
        description="Turns one session transcript keeps: past it the oldest are dropped.",
    )
    max_session_bytes: Annotated[int, Field(ge=1024, le=1 << 40)] = Field(
        default=1 * _MIB,
        description="Bytes one session transcript keeps: past it the oldest turns are dropped.",
    )
    max_transcript_bytes: Annotated[int, Field(ge=1024, le=1 << 40)] = Field(
        default=64 * _MIB,
        description="Bytes of all this agent's session transcripts; an append past it is "
        "refused `quota_exceeded`.",
    )
    max_sender_bytes: Annotated[int, Field(ge=1024, le=1 << 40)] = Field(
        default=4 * _MIB,
        description="Bytes of all the sessions of one outside sender (`<channel>:<sender>/...` "
        "session keys); an append past it is refused `quota_exceeded`.",
    )
    # A turn's context (ADR 0059; the defaults are zeroclaw.agent.MemorySpec's, a test
    # keeps them in step).
    recall: bool = Field(
        default=True,
        description="Before each model call, put this agent's records (and those of "
        "`read_memory_from`) that rank best against the turn's text into the prompt, marked "
        "as data. Only in turns whose origin is granted `memory_recall` (the operator's; a "
        "peer or an outside sender only when `peer_tools` or its peer group's `tools` name it).",
    )
    recall_k: Annotated[int, Field(ge=1, le=50)] = Field(
        default=5, description="Records recalled into a turn at most."
    )
    recall_budget_tokens: Annotated[int, Field(ge=16, le=1_000_000)] = Field(
        default=1000,
        description="Tokens (estimated) the recalled records may take in a turn's prompt; a "
        "record that does not fit whole is cut, and ends the recall.",
    )
    history_budget_tokens: Annotated[int, Field(ge=64, le=1_000_000)] = Field(
        default=8000,
        description="Tokens (estimated) of a session's earlier turns, its summary included, "
        "given to the model in each turn: the newest turns that fit.",
    )
    compact: bool = Field(
        default=True,
        description="When a session's turns outgrow `history_budget_tokens`, have this agent's "
        "provider summarise the older ones into the session's summary (and keep the durable "
        "facts it finds as records of category `compacted`) before they are dropped. Off: "
        "older turns are only left out of the prompt.",
    )


# The agent tools by name (zeroclaw.tools.DEFAULT_TOOLSET describes them to models; a test
# keeps the two in step). Spelled out here so a typo in peer_tools is a config error.
ToolName = Literal[
    "file_read",
    "file_write",
    "file_list",
    "shell",
    "memory_store",
    "memory_recall",
    "memory_forget",
    "send_message_to_peer",
    "delegate",
]
# The sub-agent tools (zeroclaw.tools.DISPATCH_TOOL_NAMES; a test keeps them in step): an
# agent has them when a sub-agent lets it call, or when it has facades (issue 12).
DispatchToolName = Literal["agent_catalog", "agent_dispatch"]
# The discovered-adapter tool (zeroclaw.tools.ADAPTER_TOOL): an agent has it when its
# `adapters` lists any (issue 15).
ADAPTER_TOOL_NAME = "invoke_adapter"
# The skill tool (zeroclaw.tools.SKILL_READ): an agent has it when its `skills` lists any.
SKILL_TOOL_NAME = "skill_read"
# A skill's folder name, as `skills` lists it (the same as zeroclaw.skills.SKILL_NAME; a
# test keeps them equal).
SKILL_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
ADAPTER_ID_SYNTAX = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def _listed_once(value: tuple[str, ...]) -> tuple[str, ...]:
    """A list of names where each appears once (a validator's check)."""
    repeated = sorted({name for name in value if value.count(name) > 1})
    if repeated:
        raise ValueError(f"listed more than once: {', '.join(repeated)}")
    return value


# --------------------------------------------------------------------------- MCP servers

# No `__` and no final `_`: the server's name in mcp__<server>__<tool> ends at the first
# `__`, so one flat name is one tool of one server (a tool name may hold `__`).
MCP_SERVER_NAME = re.compile(r"^(?!.*__)[a-z][a-z0-9_-]{0,31}(?<!_)$")
MCP_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MCP_TOOL_PREFIX = "mcp__"  # an MCP tool as the model sees it: mcp__<server>__<tool>
# A tool name every provider takes (OpenAI's function names; Anthropic's were the same):
# an allowed MCP tool's flat name must be one, or every request that offers it is refused.
PROVIDER_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
HTTP_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")  # an RFC 9110 token


def mcp_tool_name(server: str, tool: str) -> str:
    """The name an MCP server's tool is offered under (and granted by, in peer_tools and
    peer groups' tools): `mcp__<server>__<tool>`."""
    return f"{MCP_TOOL_PREFIX}{server}__{tool}"


class McpServerConfig(_Strict):
    """One MCP server (issue 26): a stdio program the agent starts as its own child, inside
    its sandbox, or a streamable-HTTP endpoint it reaches if its profile allows the host."""

    command: str | None = Field(
        default=None,
        min_length=1,
        description="stdio: the server's program: a name on the daemon's PATH, or a path "
        "(relative to this file's directory).",
    )
    args: tuple[str, ...] = Field(default=(), description="stdio: the program's arguments.")
    env: tuple[EnvVarName, ...] = Field(
        default=(),
        description="stdio: names of the daemon's environment variables the server gets (with "
        "their values); it gets nothing else of the daemon's environment.",
    )
    url: HttpUrl | None = Field(
        default=None,
        description="Streamable HTTP: the server's endpoint, e.g. http://127.0.0.1:9000/mcp.",
    )
    headers_env: dict[str, EnvVarName] = Field(
        default_factory=dict,
        description="Streamable HTTP: request headers from the daemon's environment, header "
        'name = variable name (e.g. Authorization = "GITHUB_AUTH").',
    )
    timeout_secs: Seconds = Field(
        default=30.0, description="Bound on each request to the server and on each tool call."
    )
    startup_timeout_secs: Seconds = Field(
        default=30.0,
        description="Bound on the server's start: spawned (or reached) to an answered "
        "initialize. Raise it for a server whose first start is slow (an `npx -y` or `uvx` "
        "one downloads its package).",
    )
    max_result_bytes: Annotated[int, Field(ge=256, le=16 * _MIB)] = Field(
        default=64 * 1024,
        description="A tool result larger than this is refused `mcp_result_too_large`.",
    )
    tools: tuple[str, ...] = Field(
        default=(),
        description="The server's tools agents may be offered, by the server's own names; "
        "mcp__<server>__<tool> must be a name model providers take ([A-Za-z0-9_-], at most "
        "64 characters). Default: none (a server is granted tool by tool).",
    )

    @field_validator("command")
    @classmethod
    def _command_path(cls, value: str | None, info: ValidationInfo) -> str | None:
        # A name is looked up on PATH when the server starts; a path is a path of this
        # file's, so a relative one is relative to the file's directory like every other.
        if value is None or "/" not in value:
            return value
        return str(_resolve_path(Path(value), info))

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not MCP_TOOL_NAME.match(name):
                raise ValueError(f"{name!r} is not an MCP tool name ([A-Za-z0-9_.-], 1-64)")
        return _listed_once(value)

    @field_validator("headers_env")
    @classmethod
    def _header_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not HTTP_HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name[:64]!r} is not an HTTP header name (an RFC 9110 token)")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server has either command (stdio) or url (HTTP), not both")
        if self.url is None and self.headers_env:
            raise ValueError("headers_env is for an HTTP server (url)")
        if self.command is None and (self.args or self.env):
            raise ValueError("args and env are for a stdio server (command)")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"


# --------------------------------------------------------------------------- schedules

# An agent's heartbeat is its schedule of this name, and the schedules it makes itself
# are named `reminder-<n>`: neither may be a configured schedule's name.
HEARTBEAT_SCHEDULE = "heartbeat"
REMINDER_PREFIX = "reminder-"
# The reminder tools (zeroclaw.tools.REMINDER_TOOL_NAMES; a test keeps them in step): an
# agent has them when its risk profile has `reminders`.
ReminderToolName = Literal["schedule_create", "schedule_list", "schedule_delete"]
SESSION_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
MAX_SCHEDULES_PER_AGENT = 1024


MAX_CRON_CHARS = 256  # "0,5,10,...,55" in each field is well under it


def check_cron(expr: str, timezone: str) -> str | None:
    """Why a cron schedule cannot be used (None: it can): five fields croniter reads (its
    hashed `H` fields are not cron's), a zone this machine knows, and some date it
    matches."""
    if len(expr) > MAX_CRON_CHARS:
        # croniter parses it again for every slot: a long list ('0,0,0,...', a sender's
        # reminder) held the daemon's loop for seconds each time.
        return f"a cron expression is at most {MAX_CRON_CHARS} characters"
    if not all(c == " " or (c.isprintable() and not c.isspace()) for c in expr):
        # A line break or control character (a sender's reminder) would reach the logs and
        # listings that show the expression.
        return "a cron expression is five fields of printable characters separated by spaces"
    fields = expr.split()
    if len(fields) != 5:
        return (
            f"a cron expression has five fields (minute hour day month weekday), not {len(fields)}"
        )
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from croniter import CroniterBadDateError, croniter  # only a config with a cron loads it

    if not croniter.is_valid(expr) or any(_HASHED.search(f) for f in fields):
        return f"{expr!r} is not a valid cron expression"
    try:
        ZoneInfo(timezone)
    except (ValueError, KeyError, OSError):
        return f"unknown timezone {timezone!r} (an IANA name such as Europe/Berlin)"
    try:
        croniter(expr, datetime(2026, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        return f"{expr!r} matches no date"
    return None


_HASHED = re.compile(r"(^|,)[Hh](\(|/|,|$)")


def _session_name(value: str) -> str:
    if not SESSION_NAME.match(value):
        raise ValueError("a session name is 1-64 letters, digits, '.', '_' or '-'")
    return value


class _ScheduledTurn(_Strict):
    """What a schedule's and a heartbeat's turns share."""

    session: Annotated[str, AfterValidator(_session_name)] = Field(
        default="default",
        description="The session its turns continue: a name inside the schedule's own origin "
        "(schedule:<agent>.<name>/<session>), never the operator's or a sender's.",
    )
    tools: tuple[str, ...] = Field(
        default=(),
        description="Tools its turns may use (the peer_tools names, reminder tools aside). "
        "Default: none, like any origin but the operator's.",
    )
    deliver_to: str = Field(
        default="log",
        description="Where each run's reply goes: 'log' (the daemon's log and events), or a "
        "channel this agent binds: a webhook channel with a callback_url (POSTed, signed) or "
        "a serial channel (written as lines).",
    )
    enabled: bool = Field(default=True, description="A disabled schedule never fires.")
    jitter: Annotated[Duration, Field(ge=0, le=86_400)] = Field(
        default=0.0,
        description="Each run starts up to this much after its time (the same delay for the "
        "same slot, spread over schedules), e.g. '30s'.",
    )
    timeout: Annotated[Duration, Field(gt=0, le=86_400)] = Field(
        default=600.0,
        description="A run's turn that takes longer is cancelled and reported failed (`timeout`).",
    )

    @field_validator("tools")
    @classmethod
    def _distinct_tools(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _listed_once(value)


class ScheduleConfig(_ScheduledTurn):
    """A turn the agent runs on its own (issue 28): at the times `cron` matches in
    `timezone`, or `every` interval."""

    cron: str | None = Field(
        default=None,
        max_length=256,
        description="Five cron fields (minute hour day month weekday), read in `timezone`, "
        "e.g. '0 8 * * 1-5'. A time the clocks skip runs once at the next valid time; a "
        "repeated one runs once. Either this or `every`.",
    )
    timezone: str = Field(
        default="UTC",
        max_length=64,
        description="The IANA zone `cron` is read in, e.g. 'Europe/Berlin'.",
    )
    every: Annotated[Duration, Field(ge=1, le=86_400 * 366)] | None = Field(
        default=None,
        description="An interval, e.g. '15m' or '1h30m' (at least 1s), counted from the unix "
        "epoch so a restart finds the same times. Either this or `cron`.",
    )
    text: str = Field(
        min_length=1, max_length=8192, description="The message each run sends the agent."
    )
    overlap: Literal["skip", "queue"] = Field(
        default="skip",
        description="When its time comes while its last run still runs: 'skip' it, or "
        "'queue' it (one at most) to run when the last one ends.",
    )
    catch_up: Literal["none", "latest"] = Field(
        default="none",
        description="Runs missed while the daemon was down (or more than a minute late): "
        "'none' reports them missed, 'latest' runs the latest one once.",
    )

    @model_validator(mode="after")
    def _one_trigger(self) -> ScheduleConfig:
        if (self.cron is None) == (self.every is None):
            raise ValueError("a schedule has either cron or every, not both")
        if self.cron is not None:
            problem = check_cron(self.cron, self.timezone)
            if problem is not None:
                raise ValueError(problem)
        elif self.timezone != "UTC":
            raise ValueError("timezone is for a cron schedule")
        if self.every is not None and self.jitter >= self.every:
            raise ValueError("jitter must be shorter than the interval (every)")
        return self


class HeartbeatConfig(_ScheduledTurn):
    """Every `every`, the daemon reads HEARTBEAT.md in the agent's workspace; when it has
    open items, the agent runs a turn on them (nothing runs when it is empty or absent)."""

    every: Annotated[Duration, Field(ge=1, le=86_400 * 366)] = Field(
        description="How often HEARTBEAT.md is looked at, e.g. '30m'."
    )

    @model_validator(mode="after")
    def _jitter_inside(self) -> HeartbeatConfig:
        if self.jitter >= self.every:
            raise ValueError("jitter must be shorter than the interval (every)")
        return self


MAX_PROVIDER_CHAIN = 8


class BudgetLimits(_Strict):
    tokens_per_day: Annotated[int, Field(ge=1, le=10**15)] | None = Field(
        default=None,
        description="Tokens (every kind: input, cached, cache writes, output) per UTC day; "
        "a turn that would start with them spent is refused 'budget_exceeded', a turn that "
        "spends them ends after its current step. Default: no limit.",
    )
    cost_per_day: Money | None = Field(
        default=None,
        description="Cost per UTC day, at the providers' prices ([providers.<kind>.<alias>] "
        "price); refused and ended as tokens_per_day. Default: no limit.",
    )
    turns_per_hour: Annotated[int, Field(ge=1, le=1_000_000)] | None = Field(
        default=None,
        description="Turns started in any rolling hour; one more is refused 'budget_exceeded' "
        "before any provider call. Default: no limit.",
    )


class AgentBudget(BudgetLimits):
    origins: dict[str, BudgetLimits] = Field(
        default_factory=dict,
        description="Budgets of outside origins on this agent, by key: '<channel>:<sender>' "
        "one sender (e.g. 'webhook.ops:ci-bot'); '<channel>:*' each sender of the channel on "
        "its own; '<channel>' every sender of the channel together; 'peer:<alias>', 'peer:*', "
        "'peer' the same for agents that ask or delegate; '*' each outside origin on its own "
        "(when no key of its own or its channel's '*' is set). The agent's own limits apply "
        "to every turn besides.",
    )


class AgentConfig(_Strict):
    enabled: bool = Field(default=True, description="A disabled agent is never started.")
    description: str = Field(
        default="", max_length=1024, description="One line telling operators what the agent does."
    )
    model_provider: str | tuple[str, ...] | None = Field(
        default=None,
        description="Provider as '<kind>.<alias>', e.g. 'offline.default'; or a fallback "
        "chain, a list of them tried in order: on a connection error, a timeout, HTTP 429 or "
        "5xx the next one answers (at most 8, each once).",
    )
    risk_profile: str | None = Field(default=None, description="Name of a [risk_profiles] entry.")
    runtime_profile: str | None = Field(
        default=None, description="Name of a [runtime_profiles] entry."
    )
    channels: tuple[str, ...] = Field(
        default=(), description="Channels this agent is bound to, as '<type>.<alias>'."
    )
    delegates: tuple[str, ...] = Field(
        default=(), description="Agents this agent may delegate tasks to."
    )
    workspace: WorkspaceConfig = Field(
        default_factory=WorkspaceConfig, description="The agent's workspace and grants."
    )
    memory: MemoryConfig = Field(
        default_factory=MemoryConfig,
        description="Grants over other agents' memory, and this agent's memory quotas.",
    )
    peer_tools: tuple[str, ...] = Field(
        default=(),
        description="Tools this agent may use in a turn another agent started (ask or "
        "delegate): built-in tools (file_read, file_write, file_list, shell, memory_store, "
        "memory_recall, memory_forget, send_message_to_peer, delegate), agent_catalog, "
        "agent_dispatch, one of this agent's facades, invoke_adapter when it lists adapters, "
        "skill_read when it lists skills; any other tool is refused as "
        "'tool_not_granted'. Default: none, so a peer never gets this agent's files, shell, "
        "memory, peers or sub-agents without a grant. The operator's own chat always has "
        "every tool.",
    )
    adapters: tuple[str, ...] = Field(
        default=(),
        description="Discovered adapters this agent may call with invoke_adapter, by id "
        "('zeroclaw discover list --registered'); each call still goes through the agent's "
        "risk profile and the capability's side-effect class. Default: none.",
    )
    mcp: tuple[str, ...] = Field(
        default=(),
        description="MCP servers this agent uses, by [mcp_servers] name: their allowed tools "
        "are offered as mcp__<server>__<tool>, through the agent's risk profile. Default: none.",
    )
    budget: AgentBudget = Field(
        default_factory=AgentBudget,
        description="What this agent may spend, enforced by the daemon: its own limits "
        "(every origin together) and per outside origin ('origins'). Default: none.",
    )
    facades: dict[str, str] = Field(
        default_factory=dict,
        description="One-purpose tools that dispatch to a fixed sub-agent: tool name = "
        'sub-agent id, e.g. summarize = "summarizer". A tool name is lowercase '
        "[a-z][a-z0-9_]{0,63} and not a built-in tool, agent_catalog or agent_dispatch.",
    )
    skills: tuple[str, ...] = Field(
        default=(),
        description="Skills this agent uses, by folder name under [skills] dirs "
        "(<dir>/<name>/SKILL.md): their names and descriptions are listed in its system "
        "prompt, their files read with skill_read. A skill whose declared permissions exceed "
        "this agent's risk profile is refused. Default: none.",
    )

    schedules: dict[str, ScheduleConfig] = Field(
        default_factory=dict,
        description="Turns this agent runs on its own, by name: [agents.<alias>.schedules."
        "<name>] with cron or every, text, and where the reply goes (issue 28).",
    )
    heartbeat: HeartbeatConfig | None = Field(
        default=None,
        description="Look at HEARTBEAT.md in the workspace every so often and run a turn on "
        "its open items. Absent: no heartbeat.",
    )

    @field_validator("model_provider")
    @classmethod
    def _provider_chain(cls, value: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        if isinstance(value, tuple):
            if not 1 <= len(value) <= MAX_PROVIDER_CHAIN:
                raise ValueError(f"a chain names 1 to {MAX_PROVIDER_CHAIN} providers")
            return _listed_once(value)
        return value

    @property
    def provider_chain(self) -> tuple[str, ...]:
        """The providers it names, in order (one, unless a fallback chain)."""
        if self.model_provider is None:
            return ()
        if isinstance(self.model_provider, str):
            return (self.model_provider,)
        return self.model_provider

    @field_validator("peer_tools")
    @classmethod
    def _distinct_tools(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _listed_once(value)

    @field_validator("schedules")
    @classmethod
    def _schedule_count(cls, value: dict[str, ScheduleConfig]) -> dict[str, ScheduleConfig]:
        if len(value) > MAX_SCHEDULES_PER_AGENT:
            raise ValueError(f"at most {MAX_SCHEDULES_PER_AGENT} schedules per agent")
        return value

    @field_validator("mcp")
    @classmethod
    def _mcp_servers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _listed_once(value)

    @field_validator("skills")
    @classmethod
    def _skill_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not SKILL_NAME.match(name):
                raise ValueError(
                    f"{name!r} is not a skill name (a folder name: lowercase letters, digits, "
                    "'-' and '_', a letter first, at most 64)"
                )
        return _listed_once(value)

    @field_validator("adapters")
    @classmethod
    def _adapter_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for ident in value:
            if not ADAPTER_ID_SYNTAX.match(ident):
                raise ValueError(
                    f"{ident!r} is not an adapter id (lowercase letters, digits, '.', '_', '-')"
                )
        return _listed_once(value)


# --------------------------------------------------------------------------- peer groups


class PeerGroup(_Strict):
    channel: str = Field(
        description="Channel the group applies to: a bare type ('cli') or a dotted alias "
        "('cli.local')."
    )
    agents: tuple[str, ...] = Field(
        min_length=1, description="Agents that may message one another on that channel."
    )
    external_peers: tuple[str, ...] = Field(
        default=(),
        description="Non-agent senders accepted on the channel: names matched "
        "case-insensitively with a leading '@' stripped; '*' means anyone; [] means none.",
    )
    ignore: tuple[str, ...] = Field(
        default=(), description="Senders always refused, even when 'external_peers' matches."
    )
    tools: tuple[str, ...] = Field(
        default=(),
        description="Tools a turn started by an external sender this group admits may use: "
        "the same names as peer_tools (built-in tools, agent_catalog, agent_dispatch, a "
        "member's facade, invoke_adapter); any other tool is refused as 'tool_not_granted'. "
        "Default: none, so an outside sender gets no file, shell, memory, peer or sub-agent "
        "tool without a grant. Several groups admitting one sender: the union of theirs.",
    )
    approvals: Literal["operator", "sender"] = Field(
        default="operator",
        description="Who answers a supervised approval in such a turn: 'operator' (the "
        "daemon's queue: zeroclaw approvals list|approve|deny) or 'sender' (the channel "
        "that sent the message). Several groups admitting one sender: 'sender' only when "
        "all of them say so.",
    )

    @field_validator("tools")
    @classmethod
    def _distinct_tools(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _listed_once(value)


# --------------------------------------------------------------------------- gateway

API_CHANNEL_TYPE = "api"  # an API token's channel is `api.<name>` (not a [channels] table)


class GatewayToken(_Strict):
    """One bearer token of the gateway's OpenAI-compatible API (issue 29): an outside
    identity like a webhook sender, on its own channel `api.<name>`."""

    token_env: EnvVarName = Field(
        description="Name of the environment variable holding the bearer token (the daemon's "
        "environment; agents never get it). Unset: the token is refused (logged at start)."
    )
    sender: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="The outside identity this token is: its turns have origin "
        "`api.<name>:<sender>` and are admitted by peer groups on channel `api.<name>` (or "
        "`api`) through `external_peers`, with the tools those groups list, like any outside "
        "sender. Default: the token's name.",
    )
    agents: tuple[str, ...] = Field(
        min_length=1,
        description="Agents this token may reach: its `GET /v1/models`, and the `model` of a "
        "chat completion. Any other alias is 404 model_not_found.",
    )
    rate_limit_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=60,
        description="Requests accepted per minute for this token before 429 with Retry-After.",
    )

    @field_validator("agents")
    @classmethod
    def _distinct_agents(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _listed_once(value)


class GatewayConfig(_Strict):
    """One HTTP listener: the OpenAI-compatible API (`/v1`) and the operator's dashboard
    (`/ui`), issue 29. Configured only when the table is present."""

    listen: str = Field(
        default="127.0.0.1:8788",
        description="host:port the gateway binds. Loopback only unless allow_remote.",
    )
    allow_remote: bool = Field(
        default=False,
        description="Let `listen` name a non-loopback address; then tls_cert and tls_key are "
        "required (tokens and the dashboard cookie never cross a network in clear).",
    )
    tls_cert: ConfigPath | None = Field(
        default=None, description="PEM certificate chain for TLS (with tls_key)."
    )
    tls_key: ConfigPath | None = Field(
        default=None, description="PEM private key of tls_cert (read by the daemon at start)."
    )
    operator_token_env: EnvVarName | None = Field(
        default=None,
        description="Name of the environment variable holding the operator's dashboard token "
        "(sign-in at /ui). Unset or empty: the dashboard is off (404). Never an API token's.",
    )
    tokens: dict[str, GatewayToken] = Field(
        default_factory=dict,
        description="API tokens by name ([a-z][a-z0-9_-]{0,31}); each is channel `api.<name>`.",
    )
    max_body_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = Field(
        default=1024 * 1024,
        description="Largest request body accepted (413 beyond; the rest is never read).",
    )
    max_turn_secs: Seconds = Field(
        default=600.0,
        description="The longest one API turn may take, approvals waited for included; then "
        "it is cancelled and the client gets 503.",
    )
    limits: HttpLimits = Field(
        default_factory=HttpLimits,
        description="Timeouts and connection cap of the gateway's listener (a streamed answer "
        "is bounded per write, not as a whole).",
    )

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str) -> str:
        _check_host_port(value)
        return value

    @model_validator(mode="after")
    def _tls_in_pairs(self) -> GatewayConfig:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together: set both or neither")
        return self


# --------------------------------------------------------------------------- root


class SubagentsConfig(_Strict):
    dir: ConfigPath | None = Field(
        default=None,
        description="Directory of sub-agent bundles (<dir>/<id>/agent.yaml, ...), relative to "
        "the config file; default: subagents/ beside the config file.",
    )


class SkillsConfig(_Strict):
    dirs: tuple[ConfigPath, ...] | None = Field(
        default=None,
        description="Directories holding skill folders (<dir>/<name>/SKILL.md), searched in "
        "order (the first holding a name wins), relative to the config file; default: "
        "skills/ beside the config file. No agent may write them; an agent reads only its own "
        "skills, through skill_read.",
    )


COMMAND_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")


def _check_command_name(value: str) -> str:
    if not COMMAND_NAME.match(value):
        raise ValueError(f"{value!r} is not a program name (no paths, no spaces)")
    return value


CommandName = Annotated[str, AfterValidator(_check_command_name)]


class DiscoveryOverride(_Strict):
    prefer_source: Literal["project_manifest", "config", "builtin_template", "path", "user_dir"] | (
        None
    ) = Field(
        default=None,
        description="The source that wins for this id when several find it (default order: "
        "project_manifest, config, builtin_template, path, user_dir).",
    )
    command_path: ConfigPath | None = Field(
        default=None,
        description="The one program to use for this command: an absolute path whose name is "
        "in [discovery] commands; it ends a 'command_ambiguous' and may name a "
        "workspace-local program.",
    )


class DiscoveryAlias(_Strict):
    adapter: str = Field(
        min_length=1,
        max_length=64,
        description="The registered adapter (or MCP server) id the alias runs.",
    )
    capability: str | None = Field(
        default=None,
        max_length=128,
        description="The adapter's capability it runs (default: its only one).",
    )
    tool: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="For an MCP server: the tool it calls (capability mcp.tool.call).",
    )


class DiscoveryConfig(_Strict):
    enabled: bool = Field(
        default=True, description="Scan for capabilities at all ('zeroclaw discover ...')."
    )
    scan_on_startup: bool = Field(
        default=True,
        description="The daemon scans when it starts (in the background: a slow source never "
        "delays READY).",
    )
    global_scan_timeout_ms: Annotated[int, Field(ge=100, le=600_000)] = Field(
        default=30_000,
        description="A whole scan's bound; sources still running then give partial results "
        "with a 'timeout' diagnostic.",
    )
    max_concurrent_scanners: Annotated[int, Field(ge=1, le=64)] = Field(
        default=8, description="Sources scanned at once."
    )
    max_files_per_dir: Annotated[int, Field(ge=1, le=100_000)] = Field(
        default=500, description="Files read from one directory; the rest are reported, not read."
    )
    max_manifest_bytes: Annotated[int, Field(ge=256, le=16 * 1024 * 1024)] = Field(
        default=1024 * 1024, description="Largest manifest read; a larger one is invalid."
    )
    max_command_output_bytes: Annotated[int, Field(ge=64, le=16 * 1024 * 1024)] = Field(
        default=65_536,
        description="Output kept from a '--version' probe; more is cut ('output_too_large').",
    )
    command_check_timeout_ms: Annotated[int, Field(ge=10, le=120_000)] = Field(
        default=2_000, description="Bound of one '--version' probe or model-server request."
    )
    health_ttl_secs: Annotated[int, Field(ge=0, le=86_400 * 30)] = Field(
        default=3_600, description="How long a cached health check is trusted."
    )
    allow_user_local_skills: bool = Field(
        default=False,
        description="Register workflow skills found in user directories (~/.codex/skills, "
        "~/.agents/skills); by default they are shown only.",
    )
    scan_user_dirs: bool = Field(
        default=True, description="Look at ~/.codex and ~/.agents skills and prompts at all."
    )
    commands: tuple[CommandName, ...] = Field(
        default=("codex", "claude", "gemini", "ollama"),
        description="Programs looked up on $PATH and probed with '--version' only.",
    )
    model_servers: tuple[HttpUrl, ...] = Field(
        default=(),
        description="Model server URLs to probe besides the usual loopback ports (Ollama 11434, "
        "llama.cpp 8080, vLLM 8000, LM Studio 1234); loopback only.",
    )
    probe_model_ports: bool = Field(
        default=True, description="Probe the usual loopback model-server ports."
    )
    overrides: dict[str, DiscoveryOverride] = Field(
        default_factory=dict, description="Pins by id: prefer_source, command_path."
    )
    aliases: dict[str, DiscoveryAlias] = Field(
        default_factory=dict,
        description="Business aliases, the one table: 'invoke for github.issue.create' runs "
        "the adapter + capability (or MCP server + tool) named here, admitted like a call "
        "that names it.",
    )

    @field_validator("commands")
    @classmethod
    def _distinct_commands(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _listed_once(value)

    @field_validator("model_servers")
    @classmethod
    def _loopback_only(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for url in value:
            host = re.sub(r"^https?://", "", url).split("/")[0].rsplit(":", 1)[0].strip("[]")
            if host not in ("127.0.0.1", "localhost", "::1"):
                raise ValueError(f"{url}: discovery probes loopback only (127.0.0.1, ::1)")
        return value

    @model_validator(mode="after")
    def _pins_pass_the_allowlist(self) -> DiscoveryConfig:
        for name, override in self.overrides.items():
            path = override.command_path
            if path is None:
                continue
            if name not in self.commands:
                raise ValueError(
                    f"overrides.{name}: command_path pins a command that is not in 'commands'"
                )
            if path.name != name:
                raise ValueError(
                    f"overrides.{name}: command_path {str(path)!r} names another program"
                )
        return self


class Config(_Strict):
    """The whole zeroclaw configuration file."""

    daemon: DaemonConfig = Field(
        default_factory=DaemonConfig, description="Supervisor process settings."
    )
    providers: ProvidersTable = Field(
        default_factory=ProvidersTable, description="Model providers, by kind then alias."
    )
    risk_profiles: dict[str, RiskProfile] = Field(
        default_factory=dict, description="What agents may do: named risk profiles."
    )
    runtime_profiles: dict[str, RuntimeProfile] = Field(
        default_factory=dict, description="How agents run: limits, activation, restart policy."
    )
    channels: ChannelsTable = Field(
        default_factory=ChannelsTable, description="Inbound channels, by type then alias."
    )
    agents: dict[str, AgentConfig] = Field(
        default_factory=dict, description="The configured agents, by alias."
    )
    peer_groups: dict[str, PeerGroup] = Field(
        default_factory=dict,
        description="Who may message whom: agents in a group may message one another on its "
        "channel.",
    )
    subagents: SubagentsConfig = Field(
        default_factory=SubagentsConfig,
        description="File-driven sub-agents that agents may dispatch tasks to.",
    )
    skills: SkillsConfig = Field(
        default_factory=SkillsConfig,
        description="Where the skills agents name live (a SKILL.md with front matter per folder).",
    )
    mcp_servers: dict[str, McpServerConfig] = Field(
        default_factory=dict,
        description="MCP servers agents may use as tools, by name ([a-z][a-z0-9_-]{0,31}, no "
        "'__' and no final '_': a tool is offered as mcp__<server>__<tool>).",
    )
    gateway: GatewayConfig | None = Field(
        default=None,
        description="The HTTP gateway: an OpenAI-compatible API for the agents its tokens "
        "reach, and the operator's dashboard (issue 29). Off unless the table is present.",
    )
    discovery: DiscoveryConfig = Field(
        default_factory=DiscoveryConfig,
        description="Finding capabilities on this machine: adapters/, capabilities/ and mcp/ "
        "beside the config, allowlisted programs on $PATH, user skills, loopback model "
        "servers and serial ports. Found is not registered; registered is not authorised.",
    )

    # --- lookups used across the package -------------------------------------------------

    def provider(self, ref: str) -> ProviderConfig | None:
        kind, _, alias = ref.partition(".")
        table: dict[str, ProviderConfig] | None = (
            getattr(self.providers, kind, None) if (kind in ProvidersTable.model_fields) else None
        )
        return None if table is None else table.get(alias)

    def channel_ids(self) -> list[str]:
        """Every configured channel as '<type>.<alias>', sorted: the [channels] tables, and
        each gateway token as `api.<name>`."""
        return sorted(
            [
                f"{kind}.{alias}"
                for kind in ChannelsTable.model_fields
                for alias in getattr(self.channels, kind)
            ]
            + self.api_channel_ids()
        )

    def api_channel_ids(self) -> list[str]:
        """The gateway tokens' channels, `api.<name>`."""
        tokens = self.gateway.tokens if self.gateway is not None else {}
        return [f"{API_CHANNEL_TYPE}.{name}" for name in sorted(tokens)]

    def provider_ids(self) -> list[str]:
        return sorted(
            f"{kind}.{alias}"
            for kind in ProvidersTable.model_fields
            for alias in getattr(self.providers, kind)
        )
