"""Secrets never leave discovery: one set of pure functions decides what of a found thing may
be kept, printed, published or logged (ADR 0047).

- manifest values under secret-looking keys become `<redacted>` (`redact`);
- command arguments (`redact_args`): the value of a secret-named option (`--api-key=X`,
  `--api-key X`, `--token X`, `-p X`, `password=X`) and any argument that looks like a key
  (`sk-...`, `ghp_...`, `Bearer ...`, a long high-entropy string);
- URLs and free text (`redact_text`): a URL's `user:pass@`, query and fragment parameters
  whose name looks secret (`api_key`, `key`, `token`, `sig`, ...), `Authorization: ...`,
  `name=value` pairs with a secret name, and key-looking tokens;
- environment variables are kept by NAME only (`env_names`), never read for their value;
- a probe's output (`version_token`) keeps only a version-looking token, bounded, with
  control characters gone: whatever else a program prints is never kept.

`redact_item`, `redact_snapshot` (in `_scan`) and the log filter apply these to every
field of every surface: the cache file, `--json`, events and the log.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from ._model import Diagnostic, DiscoveredItem, McpMetadata, RegistrationDecision

REDACTED = "<redacted>"

# Every place discovery's findings leave the process (the conformance table's columns).
OutputSurface = Literal["cache_file", "scan_json", "list_json", "explain_json", "events", "log"]
# Every way a secret reaches a found item (the conformance table's rows).
SecretKind = Literal[
    "option_value",  # --api-key=X, --api-key X, --token X, -p X
    "key_shaped",  # sk-..., ghp_..., a long high-entropy argument
    "auth_header",  # Bearer X, Authorization: Basic X
    "url_userinfo",  # https://user:X@host/
    "url_parameter",  # ?api_key=X, &token=X, #access_token=X
    "env_value",  # NAME=X where only NAME may be kept
    "probe_output",  # whatever a --version probe printed besides its version
]
# The text fields of a found item, and how each is redacted (`redact_item`): a new text
# field must be listed here or in PLAIN_FIELDS (tests/discovery/test_redact.py checks).
REDACTED_FIELDS: dict[str, tuple[SecretKind, ...]] = {
    "id": ("url_userinfo", "key_shaped"),
    "name": ("url_parameter", "key_shaped"),
    "source": ("url_userinfo", "url_parameter"),
    "args": ("option_value", "key_shaped", "auth_header", "url_userinfo", "url_parameter"),
    "endpoint": ("url_userinfo", "url_parameter", "key_shaped"),
    "env": ("env_value",),
    "endpoint_env": ("env_value",),
    "api_key_env": ("env_value",),
    "health": ("probe_output",),
    "candidates": ("key_shaped",),
    "effects": ("key_shaped",),
    "runtime_gate": ("key_shaped",),
    "diagnostics": ("probe_output", "url_parameter", "key_shaped"),
    "mcp": ("probe_output", "key_shaped"),
}
# Text fields that hold no outside value: closed sets, resolved paths, names checked
# against an allowlist or a registry.
PLAIN_FIELDS = frozenset(
    {
        "kind",
        "trust",
        "capabilities",
        "program",
        "command",
        "skill_class",
        "classified_by",
        "device_state",
        "callers",
        "descriptor",
        "allowlists",
    }
)

# Key names that hold secrets (case-insensitive, anywhere in the key: `GITHUB_TOKEN`,
# `x-api-key`, `clientSecret`, `db_password`, `Authorization`).
SECRET_KEY = re.compile(
    r"token|api[_-]?key|apikey|secret|password|passwd|credential|authorization|cookie|"
    r"private[_-]?key|access[_-]?key|signature|passphrase",
    re.IGNORECASE,
)
# Whole words of a name that hold secrets on their own (`key`, `sig`, `pw` in `?key=`,
# `--pw`, `X-Amz-Signature`) but would match too much as substrings (`keyboard`).
_SECRET_WORDS = frozenset(
    {
        "key",
        "sig",
        "pass",
        "pw",
        "pwd",
        "auth",
        "bearer",
        "session",
        "sessionid",
        "sid",
        "jwt",
        "otp",
        "pin",
        "pat",
    }
)
# Short options that take a password in common tools (`mysql -p`, `sshpass -p`).
SECRET_SHORT_OPTIONS = frozenset({"-p"})
# Names of a place or a name, not of a secret (`api_key_env`, `--token-file`, `keyPath`,
# `secret_name`): they hold a name, a path, an id or a URL (whose own secrets `redact_text`
# still removes) — the recommended ways to pass a secret, never refused.
_NAMES_A_PLACE = re.compile(
    r"(?:[-_.](?i:env|file|path|dir|name|id|url|type|len|length|size|count)"
    r"|(?:Env|File|Path|Dir|Name|Id|Url|Type|Length|Size|Count))$"
)
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

# Values that are keys whatever they are called.
_KEY_LOOKING = re.compile(
    r"(?:sk|pk|rk)-[A-Za-z0-9_-]{8,}"  # OpenAI, Anthropic (sk-ant-...), Stripe-like
    r"|gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{8,}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{8,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9-]{8,}"  # Slack
    r"|AKIA[0-9A-Z]{12,}|ASIA[0-9A-Z]{12,}"  # AWS access key ids
    r"|AIza[0-9A-Za-z_-]{20,}"  # Google API keys
    r"|hf_[A-Za-z0-9]{16,}"  # Hugging Face
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?"  # a JWT
)
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic|Token|Digest)(\s+)[^\s\"',;]+", re.IGNORECASE)
# A run of token characters long enough to be a generated secret.
_TOKENISH = re.compile(r"[A-Za-z0-9_+=-]{24,}")
# `name=value` / `name: value` in free text; the value runs to whitespace or a delimiter.
_PAIR = re.compile(
    r"(?P<name>[A-Za-z][A-Za-z0-9_.-]{0,63})(?P<sep>\s*[=:]\s*)(?P<value>\"[^\"]*\"|'[^']*'|[^\s&#\"',;]+)"
)
# `--secret-option value` (and `-p value`) in free text: a command line as a message shows it.
_OPTION_VALUE = re.compile(
    r"(?<![\w-])(?P<name>--?[A-Za-z][\w-]+|-p)(?P<sep>\s+)(?P<value>[^\s\"'-][^\s\"']*)"
)
_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]{0,15}://[^\s\"'<>]+")
_URL_USERINFO = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@]*@")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_VERSION = re.compile(r"(?<![\w.])v?(\d+(?:\.\d+){1,3}(?:[-+][0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?)")
_BARE_NUMBER = re.compile(r"(?<![\w.])v?(\d{1,6})(?![\w.])")
VERSION_CHARS = 40
MESSAGE_CHARS = 200
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def is_secret_name(name: str) -> bool:
    """Whether a key, an option or a parameter named `name` holds a secret (`api_key`,
    `--api-key`, `X-Api-Key`, `key`, `access_token`, `sig`); a name that only names an
    environment variable (`api_key_env`) does not."""
    bare = name.lstrip("-")
    if not bare or _NAMES_A_PLACE.search(bare):
        return False
    if SECRET_KEY.search(bare):
        return True
    return any(word.lower() in _SECRET_WORDS for word in _WORD.findall(bare))


def is_secret_key(key: str) -> bool:
    return is_secret_name(key)


def _entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def looks_like_key(token: str) -> bool:
    """A value that is a credential by its shape: a known key prefix, or a long string of
    token characters with letters of both cases and digits, or long hex, and high entropy."""
    if _KEY_LOOKING.fullmatch(token):
        return True
    if len(token) < 24 or not _TOKENISH.fullmatch(token):
        return False
    if re.fullmatch(r"[0-9a-fA-F]+", token):
        return len(token) >= 40
    classes = sum(bool(re.search(p, token)) for p in (r"[a-z]", r"[A-Z]", r"[0-9]"))
    return classes == 3 and _entropy(token) >= 3.5


def _redact_tokens(text: str) -> str:
    text = _KEY_LOOKING.sub(REDACTED, text)
    return _TOKENISH.sub(lambda m: REDACTED if looks_like_key(m.group()) else m.group(), text)


def redact_url(url: str) -> str:
    """`url` without userinfo and with the value of every secret-named query or fragment
    parameter replaced."""
    url = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", url)

    def params(part: str) -> str:
        out = []
        for pair in part.split("&"):
            name, eq, value = pair.partition("=")
            if eq and (is_secret_name(name) or looks_like_key(value)):
                value = REDACTED
            elif not eq and looks_like_key(name):
                name = REDACTED
            out.append(f"{name}{eq}{value}")
        return "&".join(out)

    base, hash_mark, fragment = url.partition("#")
    path, question, query = base.partition("?")
    path = _redact_tokens(path)
    if question:
        path += "?" + params(query)
    if hash_mark:
        path += "#" + params(fragment)
    return path


def redact_text(text: str) -> str:
    """Free text (a message, an endpoint, an id) with URLs' credentials and secret
    parameters, auth headers, secret-named `name=value` pairs and key-looking tokens
    replaced. Idempotent."""
    text = _URL.sub(lambda m: redact_url(m.group()), text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)

    def pair(match: re.Match[str]) -> str:
        if not is_secret_name(match.group("name")) or match.group("value") == REDACTED:
            return match.group()
        return f"{match.group('name')}{match.group('sep')}{REDACTED}"

    text = _PAIR.sub(pair, text)

    def option(match: re.Match[str]) -> str:
        name = match.group("name")
        if match.group("value") == REDACTED or (name != "-p" and not is_secret_name(name)):
            return match.group()
        return f"{name}{match.group('sep')}{REDACTED}"

    text = _OPTION_VALUE.sub(option, text)
    return _redact_tokens(text)


def redact_args(args: Sequence[str]) -> tuple[str, ...]:
    """Command arguments with every secret value replaced: the value of a secret-named
    option (joined with `=` or the next argument), and any argument that looks like a key."""
    out: list[str] = []
    take_next = False
    for arg in args:
        if take_next:
            out.append(REDACTED)
            take_next = False
            continue
        if arg.startswith("-") and "=" in arg:
            name = arg.partition("=")[0]
            out.append(f"{name}={REDACTED}" if is_secret_name(name) else redact_text(arg))
            continue
        if arg in SECRET_SHORT_OPTIONS:
            out.append(arg)
            take_next = True
            continue
        if arg.startswith("-") and len(arg) > 2 and is_secret_name(arg):
            out.append(arg)  # `--api-key X`, Go's `-api-key X`
            take_next = True
            continue
        if re.fullmatch(r"-p(?![a-z]+$)\S+", arg):
            out.append(f"-p{REDACTED}")  # mysql's glued `-pS3cret` (not Go's `-port`)
            continue
        if re.fullmatch(r"(?i)(bearer|basic|token)\s+\S+", arg):
            out.append(_AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", arg))
            continue
        out.append(REDACTED if looks_like_key(arg) else redact_text(arg))
    return tuple(out)


def env_names(entries: Sequence[str]) -> tuple[str, ...]:
    """Environment variable names only: `NAME=value` keeps `NAME`; what is no name goes."""
    names = []
    for entry in entries:
        name = entry.split("=", 1)[0].strip()
        if _ENV_NAME.fullmatch(name):
            names.append(name)
    return tuple(dict.fromkeys(names))


def strip_controls(text: str) -> str:
    """Text with C0/C1 controls, zero-width and bidi overrides removed."""
    return _CONTROL.sub("", text)


def version_token(output: str) -> str:
    """What is kept of a probe's output: the first version-looking token (`1.2.3`,
    `v0.9.1-beta.2`, else a bare `42`) of its output, at most VERSION_CHARS; else nothing."""
    text = strip_controls(output.replace("\n", " ").replace("\r", " ").replace("\t", " "))
    for pattern in (_VERSION, _BARE_NUMBER):
        for match in pattern.finditer(text):
            token = match.group(1)[:VERSION_CHARS]
            if not looks_like_key(token):
                return token
    return ""


def probe_message(text: str) -> str:
    """A short message built from untrusted text (an OS error, an HTTP failure): one line,
    controls gone, redacted, bounded."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return redact_text(strip_controls(line))[:MESSAGE_CHARS]


def redact(value: Any) -> Any:
    """`value` (parsed YAML/JSON/TOML) with every secret-looking key's value replaced, and
    secrets removed from strings (URLs, key-looking values); the input is not modified."""
    if isinstance(value, dict):
        return {
            key: REDACTED if isinstance(key, str) and is_secret_key(key) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def contains_secret_keys(value: Any) -> bool:
    if isinstance(value, dict):
        return any(
            (isinstance(k, str) and is_secret_key(k)) or contains_secret_keys(v)
            for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return any(contains_secret_keys(item) for item in value)
    return False


class RedactingFilter(logging.Filter):
    """Every record of the logger it is on leaves with its message redacted (the log is an
    output surface too: a message built from an id, a URL or an error carries no secret)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


# --- the model's fields -----------------------------------------------------------------------


def redact_diagnostic(note: Diagnostic) -> Diagnostic:
    return msgspec.structs.replace(
        note,
        message=redact_text(strip_controls(note.message)),
        source=redact_text(note.source),
        expected=redact_text(note.expected),
        actual=redact_text(strip_controls(note.actual)),
    )


def redact_item(item: DiscoveredItem) -> DiscoveredItem:
    """`item` with every field an outside value reaches redacted; an argument or endpoint
    that held a secret also gets a `secret_redacted` error (what is kept could not run as
    written: the operator names an environment variable instead). Idempotent."""
    args = redact_args(item.args)
    endpoint = redact_text(item.endpoint)
    notes = tuple(redact_diagnostic(d) for d in item.diagnostics)
    leaked = [
        what
        for what, before, after in (
            ("an argument", item.args, args),
            ("its endpoint", item.endpoint, endpoint),
        )
        if before != after
    ]
    if leaked and not item.errors("secret_redacted"):
        notes = (
            *notes,
            Diagnostic(
                "error",
                "secret_redacted",
                f"{' and '.join(leaked)} held a secret: it is never kept or shown, and this "
                "item is not used — pass it through an environment variable (env, api_key_env)",
                source=redact_text(item.source.display),
            ),
        )
    health = item.health
    return msgspec.structs.replace(
        item,
        id=redact_text(item.id),
        name=redact_text(strip_controls(item.name)),
        source=msgspec.structs.replace(
            item.source,
            path=redact_text(item.source.path),
            display=redact_text(strip_controls(item.source.display)),
        ),
        args=args,
        endpoint=endpoint,
        env=env_names(item.env),
        endpoint_env="".join(env_names((item.endpoint_env,))),
        api_key_env="".join(env_names((item.api_key_env,))),
        effects=redact_text(strip_controls(item.effects)),
        runtime_gate=redact_text(strip_controls(item.runtime_gate)),
        health=msgspec.structs.replace(
            health,
            version=redact_text(strip_controls(health.version))[: VERSION_CHARS * 2],
            message=redact_text(strip_controls(health.message))[:MESSAGE_CHARS],
        ),
        candidates=tuple(
            msgspec.structs.replace(
                c, display=redact_text(c.display), canonical=redact_text(c.canonical)
            )
            for c in item.candidates
        ),
        diagnostics=notes,
        mcp=None if item.mcp is None else redact_mcp(item.mcp),
    )


def _redact_value(value: object) -> object:
    """Every string inside a JSON value redacted, its shape kept."""
    if isinstance(value, str):
        return redact_text(strip_controls(value))
    if isinstance(value, list):
        return [_redact_value(v) for v in value]
    if isinstance(value, dict):
        return {redact_text(strip_controls(str(k))): _redact_value(v) for k, v in value.items()}
    return value


def redact_mcp(found: McpMetadata) -> McpMetadata:
    """What a metadata probe's server said, as text we show: redacted, without control
    characters. The tools' digests stay those of what the server sent (the pins' identity)."""

    def text(value: str) -> str:
        return redact_text(strip_controls(value))

    return msgspec.structs.replace(
        found,
        server=text(found.server),
        protocol=text(found.protocol),
        tools=tuple(
            msgspec.structs.replace(
                t,
                name=text(t.name),
                description=text(t.description),
                input_schema={text(k): _redact_value(v) for k, v in t.input_schema.items()},
            )
            for t in found.tools
        ),
        resources=tuple(text(r) for r in found.resources),
        prompts=tuple(text(p) for p in found.prompts),
    )


def redact_decision(decision: RegistrationDecision) -> RegistrationDecision:
    return msgspec.structs.replace(
        decision,
        key=redact_text(decision.key),
        shadowed_by=redact_text(decision.shadowed_by),
        diagnostics=tuple(redact_diagnostic(d) for d in decision.diagnostics),
    )
