"""Secrets never leave discovery: values under secret-looking keys become `<redacted>`.

Applied to everything a manifest contributes before it is printed, cached, published or put
into an error. Environment variables are only ever named, never read for their value.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"

# Key names that hold secrets (case-insensitive, anywhere in the key: `GITHUB_TOKEN`,
# `x-api-key`, `clientSecret`, `db_password`, `Authorization`).
SECRET_KEY = re.compile(
    r"token|api[_-]?key|apikey|secret|password|passwd|credential|authorization|cookie|"
    r"private[_-]?key",
    re.IGNORECASE,
)
# Keys that only NAME an environment variable (`api_key_env`) are safe: they hold a name.
_NAMES_AN_ENV_VAR = re.compile(r"(_env|Env|_ENV)$")
# userinfo in a URL: scheme://user:pass@host
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY.search(key)) and not _NAMES_AN_ENV_VAR.search(key)


def redact(value: Any) -> Any:
    """`value` (parsed YAML/JSON/TOML) with every secret-looking key's value replaced, and
    credentials removed from URLs in strings; the input is not modified."""
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


def redact_text(text: str) -> str:
    """A URL's `user:password@` becomes `<redacted>@`."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)


def contains_secret_keys(value: Any) -> bool:
    if isinstance(value, dict):
        return any(
            (isinstance(k, str) and is_secret_key(k)) or contains_secret_keys(v)
            for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return any(contains_secret_keys(item) for item in value)
    return False
