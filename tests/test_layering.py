"""The layering of the house, pinned as a table (ADR 0049): which package may import which.

Every import in the package counts: relative and absolute, at module level, inside
functions, and under `if TYPE_CHECKING:` (a type named in a signature is a dependency of
that signature as much as a call is; a neutral type that names a daemon type is no longer
neutral). An import edge the table does not list fails, naming the file and the line; an
edge the table lists and no module uses fails too, so the table stays tight. The rules of
the layers are checked on the table itself.

To add an edge on purpose, add its one line to EDGES (with why) and check it against the
layers below; each edge is one line so that parallel changes merge.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import zeroclaw

PACKAGE = Path(zeroclaw.__file__).resolve().parent

CORE = "_core"  # zeroclaw/__init__.py and the zeroclaw/_*.py modules
# Top-level modules that are not core: the `python -m zeroclaw` entry is the CLI's, and the
# error-code reference gathers every family's Literal from its package.
OWN_UNIT = {
    "zeroclaw.__main__": "cli",
    "zeroclaw._error_codes": "_error_codes",
    "zeroclaw._reference": "_reference",  # the docs generator walks the CLI and config
}

# The layers, lowest first. An import goes to a lower layer or stays in its own; in the
# middle layer no service imports the agent side, and the agent side takes from a service
# only its wire (the neutral request and answer types).
NEUTRAL = frozenset({CORE, "config", "events", "policy", "providers", "turns"})
TRANSPORT = frozenset({"bus"})  # the wire and both its ends: the agent's client, the router
AGENT_SIDE = frozenset({"agent", "mcp", "tools"})
SERVICES = frozenset(
    {
        "channels",
        "control",
        "conversations",
        "discovery",
        "gateway",
        "memory",
        "ops",
        "pins",
        "schedules",
        "skills",
        "subagents",
        "usage",
    }
)
ROOT = frozenset({"supervisor"})  # the composition root
OPERATOR = frozenset({"cli", "_error_codes", "_reference"})
LAYERS = (NEUTRAL, TRANSPORT, AGENT_SIDE | SERVICES, ROOT, OPERATOR)

# A service's wire: its `_wire.py` (one per service, ADR 0049) and the wire modules of the
# services whose agents call them, declared in neutral `turns` (ADR 0048) and the operation
# table they build on. They import only neutral units and each other
# (test_wire_modules_import_only_neutral_modules).
WIRE_SUPPORT = frozenset(
    {
        "zeroclaw._ops",
        "zeroclaw.turns._adapter",
        "zeroclaw.turns._dispatch",
        "zeroclaw.turns._mcp",
        "zeroclaw.turns._schedules",
        "zeroclaw.turns._memory",
        "zeroclaw.turns._subagent_records",
        "zeroclaw.turns._usage",
    }
)

# Any unit may import CORE; every other edge is listed, one a line: (importer, imported).
EDGES: dict[tuple[str, str], str] = {
    ("_core", "config"): "_http_guard takes config's HttpLimits (a type)",
    ("_core", "policy"): "_process and _schema_worker confine their child with policy's ruleset",
    ("_error_codes", "bus"): "the refusal codes",
    ("_reference", "_error_codes"): "the error-code families for docs/reference/error-codes.md",
    ("_reference", "cli"): "the click tree for docs/reference/cli.md",
    ("_reference", "config"): "the config models for docs/reference/config.md",
    ("_error_codes", "channels"): "the channel refusal and webhook error codes",
    ("_error_codes", "cli"): "the CLI's error codes",
    ("_error_codes", "control"): "the control socket's error codes",
    ("_error_codes", "gateway"): "the gateway API's error codes",
    ("_error_codes", "discovery"): "the discovery error kinds and registration reasons",
    ("_error_codes", "memory"): "the memory error codes",
    ("_error_codes", "skills"): "the skill refusal codes",
    ("_error_codes", "subagents"): "the dispatch refusal codes",
    ("_error_codes", "tools"): "the tool and snapshot error codes",
    ("agent", "bus"): "the agent's bus client",
    ("agent", "policy"): "its sandbox and path rules",
    ("agent", "providers"): "the model it talks to",
    ("agent", "tools"): "the tools a turn runs",
    ("agent", "mcp"): "an agent with [agents] mcp runs its MCP servers (issue 26)",
    ("mcp", "config"): "mcp_tool_name, the name an MCP tool is offered under",
    ("mcp", "policy"): "an MCP server's nested Landlock ruleset",
    ("mcp", "providers"): "an MCP tool's spec as the model sees it",
    ("mcp", "tools"): "MCP tools are Tools; the shell's environment and orphan reaper",
    ("mcp", "turns"): "MCP_PIN/MCP_STATE bodies, McpErrorCode, tool_digest",
    ("agent", "turns"): "the turn events and bodies it sends",
    ("bus", "config"): "the peer policy and the router are built from the config (lazily)",
    ("bus", "events"): "the router publishes its decisions",
    ("channels", "bus"): "the peer policy and the origins of inbound messages",
    ("channels", "config"): "channel and peer-group settings",
    ("channels", "control"): "its status as the control socket reports it",
    ("channels", "conversations"): "opens turns through the turn service",
    ("channels", "turns"): "the turn events it relays",
    ("cli", "agent"): "`chat -m` with no daemon runs the agent in-process",
    ("cli", "bus"): "`route` explains the peer policy",
    ("cli", "config"): "loads and checks the config",
    ("cli", "control"): "talks to the daemon through the control socket",
    ("cli", "discovery"): "`discover`",
    ("cli", "events"): "`events` prints the daemon's events",
    ("cli", "memory"): "`memory` commands and the in-process run's store",
    ("cli", "ops"): "`doctor`, `events` and `service`",
    ("cli", "pins"): "`config validate` reads the MCP pin store",
    ("cli", "policy"): "the in-process run's code paths (ADR 0044)",
    ("cli", "providers"): "the in-process run's provider",
    ("cli", "skills"): "`config validate` and the in-process run load the agents' skills",
    ("cli", "subagents"): "`config validate` checks the bundles' MCP bindings (issue 26)",
    ("gateway", "channels"): "API turns through the channel host; the gateway is an adapter",
    ("gateway", "config"): "the [gateway] settings and its tokens",
    ("gateway", "control"): "the dashboard runs the control commands in process",
    ("gateway", "events"): "the dashboard's live events",
    ("gateway", "turns"): "a turn's usage; the memory and invocation records it shows",
    ("cli", "supervisor"): "`daemon run`, and the agent specs of the in-process run",
    ("cli", "tools"): "the in-process reach answers with tool results",
    ("cli", "turns"): "the turn events it prints",
    ("cli", "usage"): "`usage` shows costs, and reads the ledger when no daemon runs",
    ("control", "events"): "`events follow` replies carry the daemon's events",
    ("control", "policy"): "sandbox gaps in status replies",
    ("control", "turns"): "the sub-agent records and refusal codes its replies carry as they are",
    ("conversations", "bus"): "the turn service speaks to the router",
    ("conversations", "events"): "publishes finished turns and approvals",
    ("conversations", "turns"): "the turn events and bodies it relays",
    ("discovery", "bus"): "adapter admissions arrive over the bus",
    ("discovery", "config"): "discovery settings",
    ("discovery", "control"): "its status as the control socket reports it",
    ("discovery", "events"): "publishes what it found and decided",
    ("discovery", "policy"): "its probes' sandbox and the kernel's health",
    ("discovery", "subagents"): "scans sub-agent bundles",
    ("discovery", "turns"): "the adapter bodies",
    ("memory", "bus"): "who owns a session",
    ("memory", "config"): "which agents are read-only",
    ("memory", "control"): "its control commands and their replies",
    ("memory", "events"): "publishes its operations",
    ("memory", "turns"): "its wire: the ops, requests, answers and error codes (turns/_memory.py)",
    ("ops", "config"): "doctor loads the config; the unit's paths",
    ("ops", "control"): "doctor asks the daemon's status",
    ("ops", "events"): "reads and filters the daemon's events",
    ("ops", "pins"): "doctor reads the MCP pin store",
    ("ops", "policy"): "doctor's kernel and root checks",
    ("pins", "bus"): "MCP_PIN and MCP_STATE arrive over the bus",
    ("pins", "config"): "who may pin which server; the allowlists; readonly agents",
    ("pins", "control"): "its control commands and their replies",
    ("pins", "events"): "publishes schema changes, trusts and server states",
    ("pins", "turns"): "its wire: the MCP ops and bodies (turns/_mcp.py)",
    ("schedules", "bus"): "a scheduled run's origin",
    ("schedules", "channels"): "runs turns through the channel host; delivers through adapters",
    ("schedules", "config"): "the schedules, heartbeats and reminder grants; delivery targets",
    ("schedules", "control"): "its control commands and their replies",
    ("schedules", "events"): "publishes its runs, skips and misses; follows reloads",
    ("schedules", "turns"): "its wire: the reminder ops and bodies (turns/_schedules.py)",
    ("providers", "turns"): "a step's TokenUsage is the usage wire's (turns/_usage.py)",
    ("skills", "config"): "where skills live, which agent lists which, their risk profiles",
    ("subagents", "bus"): "dispatch requests arrive over the bus",
    ("subagents", "config"): "sub-agent settings",
    ("subagents", "control"): "its control commands",
    ("subagents", "conversations"): "runs an invocation as a turn",
    ("subagents", "events"): "publishes finished invocations",
    ("subagents", "turns"): "the dispatch bodies and invocation states",
    ("supervisor", "gateway"): "composes the gateway when [gateway] is configured (issue 29)",
    ("supervisor", "agent"): "the agents' specs and the link to each agent",
    ("supervisor", "bus"): "composes the router",
    ("supervisor", "channels"): "composes the channels",
    ("supervisor", "config"): "loads and reloads the config",
    ("supervisor", "control"): "serves the control socket",
    ("supervisor", "conversations"): "composes the turn service and the approval queue",
    ("supervisor", "discovery"): "composes discovery and the adapter runner",
    ("supervisor", "events"): "the event sink",
    ("supervisor", "mcp"): "runs a registered MCP adapter's tool for an agent (call_once)",
    ("supervisor", "memory"): "composes the memory service",
    ("supervisor", "pins"): "composes the MCP pin service",
    ("supervisor", "ops"): "metrics and the event filter",
    ("supervisor", "policy"): "the agents' sandboxes and the daemon's code paths",
    ("supervisor", "providers"): "provider specs; the zygote preloads the providers",
    ("supervisor", "schedules"): "composes the schedule service and its store",
    ("supervisor", "skills"): "loads the agents' skills at start and reload (ADR 0056)",
    ("supervisor", "subagents"): "composes dispatch",
    ("supervisor", "tools"): "the adapters' sandbox and shell environment",
    ("supervisor", "turns"): "the chat's events and the services' names on the bus",
    ("supervisor", "usage"): "composes the usage service (ledger, budgets, metrics)",
    ("usage", "bus"): "usage reports arrive over the bus; origins name whose budget",
    ("usage", "config"): "budgets and prices",
    ("usage", "control"): "`zeroclaw usage` and its status replies",
    ("usage", "events"): "publishes what turns spent, budget refusals, breaker changes",
    ("usage", "turns"): "its wire: TokenUsage, the report and providers ops (turns/_usage.py)",
    ("tools", "policy"): "path and command policy",
    ("tools", "providers"): "tool specs as the model sees them",
    ("tools", "turns"): "the sub-agent and adapter bodies",
}


class Import(NamedTuple):
    file: str  # relative to the repository, e.g. zeroclaw/tools/_builtin.py
    line: int
    target: str  # the zeroclaw module imported, e.g. zeroclaw.bus
    names: tuple[str, ...]  # the names taken from it (empty for `import x`)


def module_of(path: Path) -> str:
    parts = ["zeroclaw", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _source(module: str) -> Path | None:
    """The file of a zeroclaw module (a package's __init__.py), None if there is none."""
    base = PACKAGE.joinpath(*module.split(".")[1:])
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def imports_of(path: Path) -> list[Import]:
    """Every zeroclaw import in one file, wherever it sits: module level, in a function,
    under TYPE_CHECKING."""
    module = module_of(path)
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    file = path.relative_to(PACKAGE.parent).as_posix()
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [Import(file, node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            names = tuple(alias.name for alias in node.names)
            if node.module is None:  # `from .. import ops`: each name may be a module
                for name in names:
                    sub = f"{target}.{name}"
                    out.append(Import(file, node.lineno, sub if _source(sub) else target, ()))
            else:
                out.append(Import(file, node.lineno, target, names))
    return [i for i in out if i.target == "zeroclaw" or i.target.startswith("zeroclaw.")]


def all_imports() -> list[Import]:
    return [i for path in sorted(PACKAGE.rglob("*.py")) for i in imports_of(path)]


def unit(module: str) -> str:
    """zeroclaw.bus._wire -> bus; zeroclaw._decode and zeroclaw -> _core."""
    if module in OWN_UNIT:
        return OWN_UNIT[module]
    parts = module.split(".")
    return CORE if len(parts) == 1 or parts[1].startswith("_") else parts[1]


def unit_of_file(file: str) -> str:
    return unit(module_of(PACKAGE.parent / file))


def found_edges() -> dict[tuple[str, str], list[Import]]:
    edges: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for imp in all_imports():
        source, dest = unit_of_file(imp.file), unit(imp.target)
        if source != dest and dest != CORE:
            edges[(source, dest)].append(imp)
    return edges


def layer(name: str) -> int:
    return next(n for n, members in enumerate(LAYERS) if name in members)


def reach(start: str) -> set[str]:
    """Every unit `start` imports, directly or through others, by the table. An edge from
    the agent side into a service takes only that service's wire (checked below), so it
    leads nowhere further."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        source = todo.pop()
        for src, dest in EDGES:
            wire_only = src in AGENT_SIDE and dest in SERVICES
            if src == source and dest not in seen and not wire_only:
                seen.add(dest)
                todo.append(dest)
    return seen


def wire_modules() -> set[str]:
    return {module_of(p) for p in PACKAGE.rglob("_wire.py")} | WIRE_SUPPORT


def defined_in(module: str, name: str) -> str:
    """The module a name imported from `module` comes from: for a package, the module its
    __init__ takes the name from (lazy names are imported under TYPE_CHECKING too)."""
    path = _source(module)
    if path is None or path.name != "__init__.py":
        return module
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 1
            and node.module
            and any((alias.asname or alias.name) == name for alias in node.names)
        ):
            return f"{module}.{node.module}"
    return module


def test_the_scan_sees_lazy_and_type_checking_imports() -> None:
    found = {(i.target, i.names) for i in imports_of(PACKAGE / "supervisor" / "_commands.py")}
    assert ("zeroclaw.ops", ()) in found  # `from .. import ops` under TYPE_CHECKING
    assert ("zeroclaw.conversations", ("Decided",)) in found  # inside a method
    assert unit("zeroclaw") == unit("zeroclaw._decode") == CORE
    assert defined_in("zeroclaw.turns", "TurnInput") == "zeroclaw.turns._wire"


def test_every_import_edge_is_in_the_table() -> None:
    unlisted = [
        f"{imp.file}:{imp.line} imports {imp.target} ({source} -> {dest})"
        for (source, dest), found in sorted(found_edges().items())
        if (source, dest) not in EDGES
        for imp in found
    ]
    assert not unlisted, "import edges outside EDGES (tests/test_layering.py):\n" + "\n".join(
        unlisted
    )


def test_the_table_lists_no_edge_that_no_module_uses() -> None:
    unused = sorted(set(EDGES) - set(found_edges()))
    assert not unused, f"drop from EDGES, no module imports so: {unused}"


def test_every_unit_has_one_layer() -> None:
    units = {unit(module_of(path)) for path in PACKAGE.rglob("*.py")}
    placed = [name for members in LAYERS for name in members]
    assert len(placed) == len(set(placed)), "a unit is in two layers"
    assert units == set(placed)


def test_imports_point_down_the_layers() -> None:
    upward = [edge for edge in EDGES if layer(edge[1]) > layer(edge[0])]
    assert not upward


def test_no_service_imports_the_agent_side() -> None:
    # The other way, the agent side may take a service's wire and nothing else
    # (test_the_agent_side_takes_only_a_services_wire).
    assert not [(s, d) for s, d in EDGES if s in SERVICES and d in AGENT_SIDE]


def test_the_agent_side_takes_only_a_services_wire() -> None:
    wire = wire_modules()
    taken = [
        f"{imp.file}:{imp.line} takes {name} from {imp.target}"
        for (source, dest), found in sorted(found_edges().items())
        if source in AGENT_SIDE and dest in SERVICES
        for imp in found
        for name in imp.names or ("*",)
        if defined_in(imp.target, name) not in wire
    ]
    assert not taken


def test_neutral_packages_and_the_tools_reach_no_daemon_code() -> None:
    for name in NEUTRAL:
        assert reach(name) <= NEUTRAL, name
    # The tools reach no bus: not directly, not through anything they import.
    assert "bus" not in reach("tools")
    # The agent reaches memory (and every other service) only through the daemon.
    assert not reach("agent") & (SERVICES | ROOT)


def test_wire_modules_import_only_neutral_modules() -> None:
    """A service's wire is what the other side may import: core, neutral packages, wires."""
    wire = wire_modules()
    loose = [
        f"{imp.file}:{imp.line} imports {imp.target}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if module_of(path) in wire
        for imp in imports_of(path)
        if unit(imp.target) not in NEUTRAL and imp.target not in wire
    ]
    assert not loose
