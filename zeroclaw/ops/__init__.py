"""Operating the daemon: its systemd unit, `doctor`, metrics and the event stream's readers."""

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
    gather_facts,
    parse_lock_readers,
    parse_proc_locks,
    run_checks,
)

__all__: list[str] = [
    "CHECKS",
    "Check",
    "CheckResult",
    "CheckStatus",
    "DaemonFacts",
    "DirFacts",
    "Facts",
    "LmdbFacts",
    "LockFacts",
    "ProbeFacts",
    "ReaderSlot",
    "SystemdFacts",
    "gather_facts",
    "parse_lock_readers",
    "parse_proc_locks",
    "run_checks",
]
