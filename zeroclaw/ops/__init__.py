"""Operating the daemon: its systemd unit, `doctor`, metrics and the event stream's readers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._doctor import (
    CHECKS,
    Check,
    CheckResult,
    CheckStatus,
    DaemonFacts,
    DirFacts,
    Facts,
    LmdbFacts,
    LockFacts,
    ProbeFacts,
    ReaderSlot,
    SystemdFacts,
    UnitInfo,
    env_file_names,
    gather_facts,
    parse_lock_readers,
    parse_proc_locks,
    parse_unit,
    run_checks,
)
from ._event_filter import (
    EVENT_KINDS,
    KIND_NAMES,
    EventFilter,
    describe,
    event_agents,
    event_json,
    event_kind,
    event_line,
    unknown_kinds,
)
from ._unit import (
    MARKER,
    SYSUSERS_PATH,
    UNIT_NAME,
    FileWrite,
    InstallPlan,
    Scope,
    UninstallPlan,
    UnitFileState,
    UnitSpec,
    configured_command,
    exec_line,
    install_plan,
    judge_unit_file,
    owned_paths,
    parse_show,
    render_unit,
    service_config_path,
    systemctl,
    sysusers_snippet,
    under_root,
    uninstall_plan,
    unit_path,
    user_exists,
    written_by_us,
    zeroclaw_command,
)

if TYPE_CHECKING:
    from ._metrics import Metrics, MetricsListen, MetricsSources, metrics_listen

# Loaded on first use: the CLI imports this package, and only the daemon needs the
# Prometheus client and the HTTP server behind the metrics.
_load = lazy_attributes(
    __name__,
    {
        "Metrics": "._metrics",
        "MetricsListen": "._metrics",
        "MetricsSources": "._metrics",
        "metrics_listen": "._metrics",
    },
)


def __getattr__(name: str) -> object:
    return _load(name, globals())


__all__: list[str] = [
    "CHECKS",
    "EVENT_KINDS",
    "KIND_NAMES",
    "MARKER",
    "SYSUSERS_PATH",
    "UNIT_NAME",
    "Check",
    "CheckResult",
    "CheckStatus",
    "DaemonFacts",
    "DirFacts",
    "EventFilter",
    "Facts",
    "FileWrite",
    "InstallPlan",
    "LmdbFacts",
    "LockFacts",
    "Metrics",
    "MetricsListen",
    "MetricsSources",
    "ProbeFacts",
    "ReaderSlot",
    "Scope",
    "SystemdFacts",
    "UninstallPlan",
    "UnitFileState",
    "UnitInfo",
    "UnitSpec",
    "configured_command",
    "describe",
    "env_file_names",
    "event_agents",
    "event_json",
    "event_kind",
    "event_line",
    "exec_line",
    "gather_facts",
    "install_plan",
    "judge_unit_file",
    "metrics_listen",
    "owned_paths",
    "parse_lock_readers",
    "parse_proc_locks",
    "parse_show",
    "parse_unit",
    "render_unit",
    "run_checks",
    "service_config_path",
    "systemctl",
    "sysusers_snippet",
    "under_root",
    "uninstall_plan",
    "unit_path",
    "unknown_kinds",
    "user_exists",
    "written_by_us",
    "zeroclaw_command",
]
