"""Sub-agents: file-driven bundles, immutable revisions (issue 12; ADR 0023).

So far: reading and judging bundles, their digest, and their read-only snapshots; admission;
the invocation state machine and restart recovery (pure); the durable LMDB record of
revisions, invocations and their timelines. Runtimes and the pipeline build on these.
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
from ._invocation import (
    RESTART_INTERRUPT,
    IllegalTransition,
    Recovery,
    advance,
    recovery_plan,
    retry_of,
)
from ._revision import materialise
from ._store import (
    DuplicateInvocation,
    InvocationKeys,
    SubagentStore,
    SubagentStoreCorrupt,
    SubagentStoreError,
    SubagentStoreFull,
    SubagentStoreLocked,
    UnknownInvocation,
)

__all__ = [
    "MAX_BUNDLE_BYTES",
    "MAX_FILE_BYTES",
    "RESERVED_IDS",
    "RESTART_INTERRUPT",
    "Admission",
    "Admitted",
    "Bundle",
    "BundleProblems",
    "DispatchRefusalCode",
    "DispatchRequest",
    "DuplicateInvocation",
    "Existing",
    "IllegalTransition",
    "InvocationKeys",
    "Manifest",
    "McpBinding",
    "Policy",
    "Recovery",
    "Refused",
    "SubagentStore",
    "SubagentStoreCorrupt",
    "SubagentStoreError",
    "SubagentStoreFull",
    "SubagentStoreLocked",
    "UnknownInvocation",
    "admit",
    "advance",
    "digest_of",
    "front_matter",
    "load_bundle",
    "materialise",
    "recovery_plan",
    "retry_of",
    "scan_bundles",
]
