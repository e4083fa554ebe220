"""Which transcript a turn reads and appends to: decided by the daemon from the turn's
origin, never by what the sender (or the agent) says. Pure.

  operator  the name as typed (`default` when none): existing transcripts stay the
            operator's. Its names cannot hold ':', so they are never an outside key.
  channel   `<channel>:<sender>/<name>`, e.g. `webhook.ops:ci-bot/default`
  peer      `peer:<alias>/<name>`
  subagent  `subagent:<caller>/<name>`
  schedule  `schedule:<agent>.<schedule>/<name>`
  api       `api.<token>:<sender>/<name>` (the name: the request's `user`)

An outside origin's namespace (`<ns>:<who>/`) is a prefix of its own keys only: each part
is percent-encoded to `[A-Za-z0-9._-]` (so it holds no ':' or '/'), and a part longer than
PART_CHARS is replaced by `~` and a digest of it (a plain part never holds '~'), which
keeps every key within the memory store's MAX_SESSION_KEY_BYTES. Whatever name a sender
sends (`default`, `peer-beta`, a separator, NUL, 4 KB) is one of its own sessions.
"""

from __future__ import annotations

import hashlib
from typing import Literal
from urllib.parse import unquote

import msgspec

from ._origin import (
    API_CHANNEL_PREFIX,
    PEER_CHANNEL,
    SCHEDULE_CHANNEL,
    SUBAGENT_ORIGIN_CHANNEL,
    Origin,
    OriginKind,
)

DEFAULT_SESSION = "default"
NAMESPACE_SEPARATOR = ":"  # after an outside origin's kind or channel
NAME_SEPARATOR = "/"  # between an outside origin's who and its session's name
MAX_SESSION_KEY_BYTES = 128  # the memory store's bound on a session (MAX_SESSION_BYTES)
PART_CHARS = 40  # the longest encoded part kept as it is: 3 parts and 2 separators fit
_PLAIN = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_DIGEST_BYTES = 12


class SessionNameRefused(ValueError):
    """An operator's session name that is not one (it would be an outside key)."""


def _part(text: str) -> str:
    raw = text.encode("utf-8", "surrogatepass")
    plain = "".join(chr(b) if b in _PLAIN else f"%{b:02X}" for b in raw)
    if len(plain) <= PART_CHARS:
        return plain
    return "~" + hashlib.blake2b(raw, digest_size=_DIGEST_BYTES).hexdigest()


def _namespace(origin: Origin) -> str:
    assert origin.sender is not None
    return f"{_part(origin.channel)}{NAMESPACE_SEPARATOR}{_part(origin.sender)}{NAME_SEPARATOR}"


def operator_session(name: str | None) -> str:
    """The operator's session key for `name` (as typed), or SessionNameRefused."""
    if not name:
        return DEFAULT_SESSION
    if NAMESPACE_SEPARATOR in name:
        raise SessionNameRefused(
            f"an operator session name cannot hold {NAMESPACE_SEPARATOR!r}: such names are "
            "other origins' sessions (read them with `zeroclaw sessions show`)"
        )
    if "\x00" in name or len(name.encode("utf-8", "surrogatepass")) > MAX_SESSION_KEY_BYTES:
        raise SessionNameRefused(f"a session name is 1..{MAX_SESSION_KEY_BYTES} bytes without NUL")
    return name


def origin_namespace(origin: Origin) -> str:
    """The prefix every session key of an outside origin starts with ("" for the operator,
    whose names are the ones without a separator)."""
    return "" if origin.is_operator else _namespace(origin)


def session_key(origin: Origin, requested: str | None) -> str:
    """The session a turn from `origin` asking for `requested` uses. An outside origin's
    request only ever names one of its own; the operator's is refused if it is not a name
    (SessionNameRefused)."""
    if origin.is_operator:
        return operator_session(requested)
    return _namespace(origin) + _part(requested or DEFAULT_SESSION)


SessionOwnerKind = OriginKind | Literal["unknown"]


class SessionOwner(msgspec.Struct, frozen=True):
    """Whose a stored session key is, as `sessions list` shows it."""

    kind: SessionOwnerKind
    who: str  # "operator", "webhook.ops:ci-bot", "peer:beta"
    name: str  # the session's name inside its origin (a digest `~...` if it was long)


def session_owner(key: str) -> SessionOwner:
    """The origin a stored key belongs to: the inverse of `session_key` (but for long parts,
    shown by their digest)."""
    if NAMESPACE_SEPARATOR not in key:
        return SessionOwner("operator", "operator", key)
    namespace, _, rest = key.partition(NAMESPACE_SEPARATOR)
    who, sep, name = rest.partition(NAME_SEPARATOR)
    if not sep:
        return SessionOwner("unknown", key, key)
    channel, sender = unquote(namespace), unquote(who)
    kind: SessionOwnerKind
    if channel == PEER_CHANNEL:
        kind = "peer"
    elif channel == SUBAGENT_ORIGIN_CHANNEL:
        kind = "subagent"
    elif channel == SCHEDULE_CHANNEL:
        kind = "schedule"
    elif channel.startswith(API_CHANNEL_PREFIX):
        kind = "api"
    else:
        kind = "channel"
    return SessionOwner(kind, f"{channel}:{sender}", unquote(name))
