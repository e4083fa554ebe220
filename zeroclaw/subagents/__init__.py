"""Sub-agents: file-driven bundles, immutable revisions (issue 12; ADR 0023).

So far: reading and judging bundles, their digest, and their read-only snapshots. The
revision store, runtimes and the dispatch pipeline build on these. The control commands
(`_control`) load on first use: importing this package does not load the control socket.
"""

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_attributes
from ._admission import (
    Admission,
    Admitted,
    DispatchRefusalCode,
    DispatchRequest,
    Existing,
    Refused,
    admit,
)
from ._bundle import (
    MAX_BUNDLE_BYTES,
    MAX_FILE_BYTES,
    RESERVED_IDS,
    Bundle,
    BundleProblems,
    Manifest,
    McpBinding,
    Policy,
    digest_of,
    front_matter,
    load_bundle,
    scan_bundles,
)
from ._revision import materialise

if TYPE_CHECKING:
    from ._control import register_subagent_commands, subagent_handlers

_load = lazy_attributes(
    __name__,
    {"register_subagent_commands": "._control", "subagent_handlers": "._control"},
)


def __getattr__(name: str) -> Any:
    return _load(name, globals())


__all__ = [
    "MAX_BUNDLE_BYTES",
    "MAX_FILE_BYTES",
    "RESERVED_IDS",
    "Admission",
    "Admitted",
    "Bundle",
    "BundleProblems",
    "DispatchRefusalCode",
    "DispatchRequest",
    "Existing",
    "Manifest",
    "McpBinding",
    "Policy",
    "Refused",
    "admit",
    "digest_of",
    "front_matter",
    "load_bundle",
    "materialise",
    "register_subagent_commands",
    "scan_bundles",
    "subagent_handlers",
]
