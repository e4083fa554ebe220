"""What agents spend, and what they may (issue 27, ADR 0057): the usage ledger (LMDB in the
daemon's state dir), prices from the config, budgets that admit and end turns, and the
daemon's usage service that agents report their steps to.

Daemon side: it speaks to the router (`bus`), reads the config and publishes events. The
wire (`TokenUsage`, `UsageReport`, ...) is in the neutral `turns` package. The prices are
plain Python; the rest loads on first use, so `zeroclaw usage` through a daemon loads no
store, bus or config models (ADR 0035).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._prices import FREE, PICO, Price, cost, per_token, shown, units

if TYPE_CHECKING:
    from ._budget import (
        MAX_SCOPES,
        BudgetBook,
        Budgeted,
        Budgets,
        Limits,
        OverBudget,
        Scope,
        ScopeKind,
        Spent,
        scopes_of,
    )
    from ._control import UsageQueryCommand
    from ._ledger import (
        LedgerCorrupt,
        LedgerError,
        LedgerFull,
        LedgerKey,
        LedgerLocked,
        Tally,
        UsageLedger,
    )
    from ._service import (
        MAX_KEYS_PER_DAY,
        OTHER_PROVIDER,
        UNKNOWN_ORIGIN,
        TurnOwner,
        UsageCounts,
        UsageService,
        usage_row,
        utc_day,
    )

_WHERE = {
    **dict.fromkeys(
        (
            "MAX_SCOPES",
            "Budgeted",
            "BudgetBook",
            "Budgets",
            "Limits",
            "OverBudget",
            "Scope",
            "ScopeKind",
            "Spent",
            "scopes_of",
        ),
        "._budget",
    ),
    "UsageQueryCommand": "._control",
    **dict.fromkeys(
        (
            "LedgerCorrupt",
            "LedgerError",
            "LedgerFull",
            "LedgerKey",
            "LedgerLocked",
            "Tally",
            "UsageLedger",
        ),
        "._ledger",
    ),
    **dict.fromkeys(
        (
            "MAX_KEYS_PER_DAY",
            "OTHER_PROVIDER",
            "UNKNOWN_ORIGIN",
            "TurnOwner",
            "UsageCounts",
            "UsageService",
            "usage_row",
            "utc_day",
        ),
        "._service",
    ),
}
_load = lazy_attributes(__name__, _WHERE)


def __getattr__(name: str) -> object:
    return _load(name, globals())


__all__ = [
    "FREE",
    "MAX_KEYS_PER_DAY",
    "MAX_SCOPES",
    "OTHER_PROVIDER",
    "PICO",
    "UNKNOWN_ORIGIN",
    "BudgetBook",
    "Budgeted",
    "Budgets",
    "LedgerCorrupt",
    "LedgerError",
    "LedgerFull",
    "LedgerKey",
    "LedgerLocked",
    "Limits",
    "OverBudget",
    "Price",
    "Scope",
    "ScopeKind",
    "Spent",
    "Tally",
    "TurnOwner",
    "UsageCounts",
    "UsageLedger",
    "UsageQueryCommand",
    "UsageService",
    "cost",
    "per_token",
    "scopes_of",
    "shown",
    "units",
    "usage_row",
    "utc_day",
]
