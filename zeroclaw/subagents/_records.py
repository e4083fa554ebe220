"""What only the daemon side of sub-agents names: the listings' schema version and the
callers besides an agent alias. The records themselves are defined once, in the neutral
`zeroclaw.turns` (the control replies carry the same structs), and imported from there.
"""

from __future__ import annotations

SCHEMA_VERSION = 1  # of every listing the CLI prints (`schema_version`)

# Who may be a caller besides an agent alias (allowedCallers).
CLI_CALLER = "cli"
WORKFLOW_CALLER = "internal-workflow"
