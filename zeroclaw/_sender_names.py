"""How an external sender's id is spelled once the daemon has read it: the one key its
admission, its rate budget and its sessions are decided by (`ci-bot`, `CI-BOT` and
`@ci-bot` are one sender). Shared by the config's peer rules and the bus's origins."""

from __future__ import annotations

import re

_EDGES = re.compile(r"^[\s@]+|\s+$")


def normalize_sender(name: str) -> str:
    """Case-folded, with the leading '@' and surrounding blanks dropped. Idempotent, so a
    name normalised once compares equal wherever it is normalised again."""
    folded = name.casefold()
    while True:  # casefolding can expose edges again only in theory; stop at a fixed point
        trimmed = _EDGES.sub("", folded).casefold()
        if trimmed == folded:
            return trimmed
        folded = trimmed
