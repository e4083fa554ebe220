"""Sub-agents: file-driven bundles, immutable revisions (issue 12; ADR 0023).

So far: reading and judging bundles and their digest. Revisions, runtimes and the
dispatch pipeline build on this.
"""

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

__all__ = [
    "MAX_BUNDLE_BYTES",
    "MAX_FILE_BYTES",
    "RESERVED_IDS",
    "Bundle",
    "BundleProblems",
    "Manifest",
    "McpBinding",
    "Policy",
    "digest_of",
    "front_matter",
    "load_bundle",
    "scan_bundles",
]
