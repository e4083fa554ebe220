"""Agent discovery: find capabilities on this machine, decide each with a reason, explain it.

Found is not registered, registered is not authorised, authorised is not executed (ADR 0034).
"""

from ._cache import CacheFile, DiscoveryCache, Inputs, current_inputs, verdict
from ._context import SOURCE_NAMES, Found, ScanContext, scan_context
from ._decide import TARGETS, DecisionPolicy, decide, judge
from ._diff import ScanDiff, diff
from ._model import (
    SCHEMA_VERSION,
    SOURCE_PRIORITY,
    CapabilityDescriptor,
    ClassifiedBy,
    CommandCandidate,
    DeviceState,
    Diagnostic,
    DiscoveredItem,
    DiscoveryErrorKind,
    Health,
    HealthStatus,
    ItemKind,
    RegistrationAction,
    RegistrationDecision,
    RegistrationReason,
    RegistrationTarget,
    SideEffect,
    SkillClass,
    Source,
    SourceKind,
    Summary,
    TrustLevel,
    summarise,
)
from ._redact import REDACTED, contains_secret_keys, is_secret_key, redact, redact_text
from ._report import AuditRow, Check, audit_rows, discovery_checks
from ._run import CacheLocked, Outcome, discover
from ._scan import Entry, Snapshot, SourceReport, decision_policy, scan
from ._schemas import SCHEMAS

__all__ = [
    "REDACTED",
    "SCHEMAS",
    "SCHEMA_VERSION",
    "SOURCE_NAMES",
    "SOURCE_PRIORITY",
    "TARGETS",
    "AuditRow",
    "CacheFile",
    "CacheLocked",
    "CapabilityDescriptor",
    "Check",
    "ClassifiedBy",
    "CommandCandidate",
    "DecisionPolicy",
    "DeviceState",
    "Diagnostic",
    "DiscoveredItem",
    "DiscoveryCache",
    "DiscoveryErrorKind",
    "Entry",
    "Found",
    "Health",
    "HealthStatus",
    "Inputs",
    "ItemKind",
    "Outcome",
    "RegistrationAction",
    "RegistrationDecision",
    "RegistrationReason",
    "RegistrationTarget",
    "ScanContext",
    "ScanDiff",
    "SideEffect",
    "SkillClass",
    "Snapshot",
    "Source",
    "SourceKind",
    "SourceReport",
    "Summary",
    "TrustLevel",
    "audit_rows",
    "contains_secret_keys",
    "current_inputs",
    "decide",
    "decision_policy",
    "diff",
    "discover",
    "discovery_checks",
    "is_secret_key",
    "judge",
    "redact",
    "redact_text",
    "scan",
    "scan_context",
    "summarise",
    "verdict",
]
