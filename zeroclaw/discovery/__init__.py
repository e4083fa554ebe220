"""Agent discovery: find capabilities on this machine, decide each with a reason, explain it.

Found is not registered, registered is not authorised, authorised is not executed (ADR 0034).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._cache import (
        CacheFile,
        DiscoveryCache,
        Inputs,
        current_inputs,
        verdict,
    )
    from ._context import (
        PROJECT_DIRS,
        SOURCE_NAMES,
        Found,
        ScanContext,
        scan_context,
    )
    from ._decide import (
        TARGETS,
        DecisionPolicy,
        decide,
        judge,
    )
    from ._diff import (
        ScanDiff,
        diff,
    )
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
    from ._redact import (
        REDACTED,
        contains_secret_keys,
        is_secret_key,
        redact,
        redact_text,
    )
    from ._registry import (
        AdapterRefusalCode,
        AdapterRegistry,
        CallAllowed,
        CallRefused,
        RegisteredAdapter,
        RegistryChange,
        RiskLevelName,
        admit_call,
    )
    from ._report import (
        AuditRow,
        Check,
        audit_rows,
        discovery_checks,
    )
    from ._run import (
        CacheLocked,
        Outcome,
        discover,
    )
    from ._scan import (
        Entry,
        Snapshot,
        SourceReport,
        decision_policy,
        scan,
    )
    from ._schemas import (
        SCHEMAS,
    )
    from ._service import (
        AdapterRun,
        AdapterRunner,
        DiscoveryService,
    )
    from ._watch import (
        Debounce,
    )

# Loaded on first use: the CLI registers `zeroclaw discover` at every start, and only
# the discover commands and the daemon need the scanners (jsonschema, YAML, httpx).
_load = lazy_attributes(
    __name__,
    {
        "AdapterRefusalCode": "._registry",
        "AdapterRegistry": "._registry",
        "AdapterRun": "._service",
        "AdapterRunner": "._service",
        "AuditRow": "._report",
        "CacheFile": "._cache",
        "CacheLocked": "._run",
        "CallAllowed": "._registry",
        "CallRefused": "._registry",
        "CapabilityDescriptor": "._model",
        "Check": "._report",
        "ClassifiedBy": "._model",
        "CommandCandidate": "._model",
        "Debounce": "._watch",
        "DecisionPolicy": "._decide",
        "DeviceState": "._model",
        "Diagnostic": "._model",
        "DiscoveredItem": "._model",
        "DiscoveryCache": "._cache",
        "DiscoveryErrorKind": "._model",
        "DiscoveryService": "._service",
        "Entry": "._scan",
        "Found": "._context",
        "Health": "._model",
        "HealthStatus": "._model",
        "Inputs": "._cache",
        "ItemKind": "._model",
        "Outcome": "._run",
        "REDACTED": "._redact",
        "RegisteredAdapter": "._registry",
        "RegistrationAction": "._model",
        "RegistrationDecision": "._model",
        "RegistrationReason": "._model",
        "RegistrationTarget": "._model",
        "RegistryChange": "._registry",
        "RiskLevelName": "._registry",
        "SCHEMAS": "._schemas",
        "SCHEMA_VERSION": "._model",
        "PROJECT_DIRS": "._context",
        "SOURCE_NAMES": "._context",
        "SOURCE_PRIORITY": "._model",
        "ScanContext": "._context",
        "ScanDiff": "._diff",
        "SideEffect": "._model",
        "SkillClass": "._model",
        "Snapshot": "._scan",
        "Source": "._model",
        "SourceKind": "._model",
        "SourceReport": "._scan",
        "Summary": "._model",
        "TARGETS": "._decide",
        "TrustLevel": "._model",
        "admit_call": "._registry",
        "audit_rows": "._report",
        "contains_secret_keys": "._redact",
        "current_inputs": "._cache",
        "decide": "._decide",
        "decision_policy": "._scan",
        "diff": "._diff",
        "discover": "._run",
        "discovery_checks": "._report",
        "is_secret_key": "._redact",
        "judge": "._decide",
        "redact": "._redact",
        "redact_text": "._redact",
        "scan": "._scan",
        "scan_context": "._context",
        "summarise": "._model",
        "verdict": "._cache",
    },
)


def __getattr__(name: str) -> Any:
    return _load(name, globals())


__all__ = [
    "PROJECT_DIRS",
    "REDACTED",
    "SCHEMAS",
    "SCHEMA_VERSION",
    "SOURCE_NAMES",
    "SOURCE_PRIORITY",
    "TARGETS",
    "AdapterRefusalCode",
    "AdapterRegistry",
    "AdapterRun",
    "AdapterRunner",
    "AuditRow",
    "CacheFile",
    "CacheLocked",
    "CallAllowed",
    "CallRefused",
    "CapabilityDescriptor",
    "Check",
    "ClassifiedBy",
    "CommandCandidate",
    "Debounce",
    "DecisionPolicy",
    "DeviceState",
    "Diagnostic",
    "DiscoveredItem",
    "DiscoveryCache",
    "DiscoveryErrorKind",
    "DiscoveryService",
    "Entry",
    "Found",
    "Health",
    "HealthStatus",
    "Inputs",
    "ItemKind",
    "Outcome",
    "RegisteredAdapter",
    "RegistrationAction",
    "RegistrationDecision",
    "RegistrationReason",
    "RegistrationTarget",
    "RegistryChange",
    "RiskLevelName",
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
    "admit_call",
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
