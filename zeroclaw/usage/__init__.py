"""What agents spend, and what they may (issue 27, ADR 0054): the usage ledger (LMDB in the
daemon's state dir), prices from the config, budgets that admit and end turns, and the
daemon's usage service that agents report their steps to.

Daemon side: it speaks to the router (`bus`), reads the config and publishes events. The
wire (`TokenUsage`, `UsageReport`, ...) is in the neutral `turns` package.
"""

from __future__ import annotations

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
from ._prices import FREE, PICO, Price, cost, per_token, shown, units
from ._service import (
    MAX_ORIGINS_PER_DAY,
    OTHER_PROVIDER,
    UNKNOWN_ORIGIN,
    TurnOwner,
    UsageCounts,
    UsageService,
    usage_row,
    utc_day,
)

__all__ = [
    "FREE",
    "MAX_ORIGINS_PER_DAY",
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
