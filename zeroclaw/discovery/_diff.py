"""What changed between two scans, by stable id (kind + id, and source for shadowed ones)."""

from __future__ import annotations

import msgspec

from ._model import DiscoveredItem
from ._scan import Entry, Snapshot


class ScanDiff(msgspec.Struct, frozen=True):
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()  # what was found differs (paths, capabilities, manifest)
    health_changed: tuple[str, ...] = ()
    policy_changed: tuple[str, ...] = ()  # same facts, another decision
    shadowed: tuple[str, ...] = ()
    unshadowed: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not any(msgspec.structs.astuple(self))


def _winners(snapshot: Snapshot) -> dict[str, Entry]:
    """One entry per key: the one not shadowed (every key has exactly one)."""
    return {e.item.key: e for e in snapshot.entries if e.decision.action != "shadowed"}


def _shadowed_keys(snapshot: Snapshot) -> set[str]:
    return {
        f"{e.item.key}@{e.item.source.kind}"
        for e in snapshot.entries
        if e.decision.action == "shadowed"
    }


def facts(item: DiscoveredItem) -> bytes:
    """The item without its health (and the probe's notes), for 'changed'."""
    document = msgspec.to_builtins(item)
    document.pop("health", None)
    document["diagnostics"] = [
        d for d in document.get("diagnostics", []) if d.get("kind") not in _PROBE_KINDS
    ]
    return msgspec.json.encode(document)


_PROBE_KINDS = {"command_timeout", "health_check_failed", "output_too_large", "permission_denied"}


def diff(before: Snapshot, after: Snapshot) -> ScanDiff:
    old, new = _winners(before), _winners(after)
    changed, health, policy = [], [], []
    for key in sorted(old.keys() & new.keys()):
        a, b = old[key], new[key]
        if facts(a.item) != facts(b.item):
            changed.append(key)
        elif a.decision != b.decision:
            policy.append(key)
        if a.item.health.status != b.item.health.status:
            health.append(key)
    was, now = _shadowed_keys(before), _shadowed_keys(after)
    return ScanDiff(
        added=tuple(sorted(new.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - new.keys())),
        changed=tuple(changed),
        health_changed=tuple(health),
        policy_changed=tuple(policy),
        shadowed=tuple(sorted(now - was)),
        unshadowed=tuple(sorted(was - now)),
    )
