"""Package attributes that load their module on first use (keeps light imports light)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, MutableMapping


def lazy_attributes(
    package: str, where: dict[str, str]
) -> Callable[[str, MutableMapping[str, object]], object]:
    """A module-level `__getattr__` body: `where` maps attribute -> relative module."""

    def load(name: str, namespace: MutableMapping[str, object]) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value  # later lookups never come back here
        return value

    return load
