"""Sub-agents: file-driven bundles, immutable revisions, a strict and durable dispatch
pipeline (issue 12; ADR 0023, 0024).

Bundles are read and judged (`_bundle`), each revision is a read-only snapshot
(`_revision`) recorded by the registry (`_registry`); the dispatch service (`_dispatch`)
admits (`_admission`), persists (`_store`, `_invocation`) and runs invocations on revision
runtimes, and the control commands (`_control`, loaded on first use so that importing this
package does not load the control socket) reach it through `SubagentsApi`.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from .._schema_check import VALIDATION_OUTCOMES, Invalid, Outcome, OutOfBound, Unusable, Valid
from ..turns import (
    DispatchRefusalCode,
    EventBody,
    Invocation,
    InvocationErrorCode,
    InvocationEvent,
    McpBinding,
    Policy,
    RevisionRecord,
    StateEntered,
    TextDelta,
    ToolCalled,
)
from ._admission import (
    Admission,
    Admitted,
    DispatchRequest,
    Existing,
    Refused,
    admit,
)
from ._api import LoadedRevision, SubagentsApi
from ._bundle import (
    MAX_BUNDLE_BYTES,
    MAX_FILE_BYTES,
    RESERVED_IDS,
    Bundle,
    BundleProblems,
    Manifest,
    digest_of,
    front_matter,
    load_bundle,
    scan_bundles,
)
from ._dispatch import DispatchService, RuntimeHost, Verdict, verdict
from ._invocation import (
    RESTART_INTERRUPT,
    IllegalTransition,
    Recovery,
    advance,
    recovery_plan,
    retry_of,
)
from ._records import CLI_CALLER, SCHEMA_VERSION, WORKFLOW_CALLER
from ._registry import SubagentRegistry
from ._revision import SnapshotDamaged, load_snapshot, materialise, runtime_identity
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
from ._validator import VALIDATION_SECS, ValidatorPool

if TYPE_CHECKING:
    from ._control import register_subagent_commands, subagent_handlers

_load = lazy_attributes(
    __name__,
    {"register_subagent_commands": "._control", "subagent_handlers": "._control"},
)


def __getattr__(name: str) -> object:
    return _load(name, globals())


__all__ = [
    "CLI_CALLER",
    "MAX_BUNDLE_BYTES",
    "MAX_FILE_BYTES",
    "RESERVED_IDS",
    "RESTART_INTERRUPT",
    "SCHEMA_VERSION",
    "VALIDATION_OUTCOMES",
    "VALIDATION_SECS",
    "WORKFLOW_CALLER",
    "Admission",
    "Admitted",
    "Bundle",
    "BundleProblems",
    "DispatchRefusalCode",
    "DispatchRequest",
    "DispatchService",
    "DuplicateInvocation",
    "EventBody",
    "Existing",
    "IllegalTransition",
    "Invalid",
    "Invocation",
    "InvocationErrorCode",
    "InvocationEvent",
    "InvocationKeys",
    "LoadedRevision",
    "Manifest",
    "McpBinding",
    "OutOfBound",
    "Outcome",
    "Policy",
    "Recovery",
    "Refused",
    "RevisionRecord",
    "RuntimeHost",
    "SnapshotDamaged",
    "StateEntered",
    "SubagentRegistry",
    "SubagentStore",
    "SubagentStoreCorrupt",
    "SubagentStoreError",
    "SubagentStoreFull",
    "SubagentStoreLocked",
    "SubagentsApi",
    "TextDelta",
    "ToolCalled",
    "UnknownInvocation",
    "Unusable",
    "Valid",
    "ValidatorPool",
    "Verdict",
    "admit",
    "advance",
    "digest_of",
    "front_matter",
    "load_bundle",
    "load_snapshot",
    "materialise",
    "recovery_plan",
    "register_subagent_commands",
    "retry_of",
    "runtime_identity",
    "scan_bundles",
    "subagent_handlers",
    "verdict",
]
