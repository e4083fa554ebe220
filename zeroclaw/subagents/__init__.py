"""Sub-agents: file-driven bundles, immutable revisions (issue 12; ADR 0023).

So far: reading and judging bundles, their digest, and their read-only snapshots. The
revision store, runtimes and the dispatch pipeline build on these.
"""

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
    "scan_bundles",
]
