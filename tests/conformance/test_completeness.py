"""The matrix covers everything the product declares: a new tool, channel type, control
command, bus service, risk level, grant mode or origin kind (x every session kind) without
conformance cells fails here."""

from __future__ import annotations

from tests.conformance import _registries as registries
from tests.conformance._matrix import (
    BOUNDARIES,
    CHANNEL_PATHS,
    CONTEXT_CASES,
    GRANT_PROFILES,
    LEVEL_PROFILES,
    PATHS,
    PROFILES,
    SESSION_KINDS,
    SIGNAL_TARGETS,
    all_cells,
    confinement_kinds,
)


def test_every_cell_uses_a_declared_boundary_path_and_profile() -> None:
    for cell in all_cells():
        assert cell.boundary in BOUNDARIES, cell.key
        assert cell.path in PATHS, cell.key
        assert cell.profile in PROFILES, cell.key


def test_every_agent_tool_has_cells() -> None:
    covered = {c.tool for c in all_cells() if c.tool}
    missing = registries.agent_tools() - covered
    assert not missing, f"tools without a conformance cell: {sorted(missing)}"


def test_every_channel_type_has_a_path_with_cells() -> None:
    paths = {c.path for c in all_cells()}
    for kind in registries.channel_types():
        assert kind in CHANNEL_PATHS, f"channel type {kind!r} has no conformance path"
        assert CHANNEL_PATHS[kind] in paths, f"channel type {kind!r} has no cells"


def test_every_control_command_has_a_cell() -> None:
    actions = {c.action for c in all_cells() if c.path == "control_socket"}
    missing = registries.control_commands() - actions
    assert not missing, f"control commands without a conformance cell: {sorted(missing)}"


def test_every_bus_service_has_a_router_cell() -> None:
    actions = {c.action for c in all_cells() if c.boundary == "router" and c.path == "router"}
    missing = registries.bus_services() - actions
    assert not missing, f"bus services without a conformance cell: {sorted(missing)}"


def test_every_risk_level_and_grant_mode_plays_a_profile_with_cells() -> None:
    profiles = {c.profile for c in all_cells()}
    for level in registries.risk_levels():
        assert LEVEL_PROFILES.get(level) in profiles, f"risk level {level!r} has no cells"
    for mode in registries.access_modes():
        assert GRANT_PROFILES.get(mode) in profiles, f"grant mode {mode!r} has no cells"
    assert "supervised_deny" in profiles and "read_memory_from" in profiles


def test_every_kind_of_daemon_code_has_tool_and_kernel_cells_for_every_level() -> None:
    """Generated from the product's CODE_PATH_KINDS: a new kind of code path (ADR 0044)
    without a tool and a kernel cell for every risk level fails here."""
    have = {
        (c.extra.get("code_kind"), c.path, c.profile)
        for c in all_cells()
        if c.boundary == "daemon_code"
    }
    for kind in registries.code_path_kinds():
        for path in ("grammar/daemon", "kernel"):
            for profile in LEVEL_PROFILES.values():
                assert (kind, path, profile) in have, f"daemon code {kind!r}: no {path} cell"


def test_every_boundary_has_cells() -> None:
    boundaries = {c.boundary for c in all_cells()}
    missing = set(BOUNDARIES) - boundaries
    assert not missing, f"boundaries without cells: {sorted(missing)}"


def test_every_discovery_surface_and_secret_kind_has_a_cell() -> None:
    cells = {(c.extra.get("surface"), c.action) for c in all_cells() if c.path == "discovery"}
    for surface in registries.discovery_surfaces():
        for kind in registries.secret_kinds():
            assert (surface, kind) in cells, f"no cell for a {kind} secret in {surface}"


def test_every_http_listener_of_the_model_has_every_listener_case() -> None:
    from tests.conformance._matrix import LISTENER_CASES

    cases = {
        (c.extra["listener"], c.case.partition(": ")[2])
        for c in all_cells()
        if c.path == "http_listener"
    }
    wanted = {*LISTENER_CASES, "no credential", "an agent without the credential"}
    for listener in registries.http_listeners():
        missing = {case for case in wanted if (listener, case) not in cases}
        assert not missing, f"HTTP listener {listener} lacks cells: {sorted(missing)}"


def test_every_origin_kind_has_a_cell_for_every_session_kind() -> None:
    cells = {
        (c.extra["origin"], c.extra["session_kind"])
        for c in all_cells()
        if c.boundary == "session_transcripts" and "origin" in c.extra
    }
    for kind in registries.origin_kinds():
        for session_kind in SESSION_KINDS:
            assert (kind, session_kind) in cells, f"origin {kind!r} x {session_kind!r}: no cell"


def test_every_origin_kind_has_a_cell_for_every_tool_and_an_approval_route() -> None:
    cells = [c for c in all_cells() if c.path == "origin"]
    pairs = {(c.extra["kind"], c.tool) for c in cells if c.boundary == "origin_tools"}
    wanted = {(k, t) for k in registries.origin_kinds() for t in registries.agent_tools()}
    assert not wanted - pairs, f"origin x tool without a cell: {sorted(wanted - pairs)}"
    routed = {c.extra["kind"] for c in cells if c.boundary == "approvals"}
    assert routed == registries.origin_kinds(), "an origin kind without an approval route"


def test_every_quota_kind_has_a_refused_and_an_allowed_cell() -> None:
    cells = [c for c in all_cells() if c.boundary == "memory_quotas"]
    for kind in registries.quota_kinds():
        kinds = {c.expect.kind for c in cells if c.action == kind}
        assert kinds == {"refused", "allowed"}, f"quota {kind!r} lacks cells: {kinds}"


def test_every_validation_outcome_has_cells_on_both_sides() -> None:
    cells = [c for c in all_cells() if c.boundary == "validation_bounds"]
    for outcome in registries.validation_outcomes():
        sides = {c.extra["side"] for c in cells if c.action == outcome}
        assert sides == {"input", "output"}, f"validation outcome {outcome!r}: {sides}"


def test_every_process_kind_has_signal_capability_and_network_cells() -> None:
    """ADR 0043: every kind of process the daemon starts (the product's PROCESS_KINDS)
    signals nobody outside, holds no capability and connects nowhere it need not."""
    from zeroclaw.policy import PROCESS_KINDS

    assert set(confinement_kinds()) == set(PROCESS_KINDS)
    cells = [c for c in all_cells() if "kind" in c.extra]
    for kind in PROCESS_KINDS:
        cases = {c.action for c in cells if c.extra["kind"] == kind}
        wanted = {f"signal {t}" for t in SIGNAL_TARGETS} | {"capabilities", "tcp connect"}
        assert wanted <= cases, (kind, sorted(wanted - cases))


# What an agent's MCP server, a child process inside its sandbox, must be shown not to do
# (ADR 0053), for every risk level; a missing row fails here.
MCP_SERVER_ROWS = {
    "server writes outside the workspace": "kernel_denied",
    "server reads daemon config": "kernel_denied",
    "server reads daemon memory file": "kernel_denied",
    "server environment holds only named variables": "allowed",
}


def test_every_risk_level_has_the_mcp_server_rows() -> None:
    cells = {(c.case, c.profile): c for c in all_cells() if c.boundary == "mcp_server"}
    for case, kind in MCP_SERVER_ROWS.items():
        for level, profile in LEVEL_PROFILES.items():
            cell = cells.get((case, profile))
            assert cell is not None, f"MCP server row {case!r}: no cell for {level}"
            assert cell.path == "mcp_server", cell.key
            # A readonly agent is never offered a tool that is not read-only: the engine
            # refuses it before the server is asked.
            held = (kind, "refused") if level == "readonly" else (kind,)
            assert cell.expect.kind in held, cell.key


def test_every_risk_level_has_mcp_tool_rows_and_approvals_are_asked() -> None:
    """A read-only MCP tool for every level; one that is not read-only never reaches a
    readonly agent, and waits for the operator's yes under a supervised one."""
    cells = {(c.case, c.profile): c.expect for c in all_cells() if c.boundary == "mcp_tools"}
    for profile in LEVEL_PROFILES.values():
        assert cells[("read-only tool", profile)].kind == "allowed", profile
        assert ("tool not read-only", profile) in cells, profile
        assert ("tool outside the config's allowlist", profile) in cells, profile
    assert cells[("tool not read-only", "readonly")].code == "mcp_tool_not_allowed"
    assert cells[("tool not read-only", "supervised_deny")].code == "approval_denied"
    assert cells[("read-only tool", "supervised_deny")].kind == "allowed"  # nothing asked


def test_every_origin_kind_has_mcp_tool_cells() -> None:
    """An MCP tool by origin: the operator's turn gets it, an outside origin (a peer, a
    channel's sender) only when its grant lists it, a sub-agent turn never an agent's."""
    cells = [
        c
        for c in all_cells()
        if c.path == "origin"
        and c.boundary == "origin_tools"
        and (c.tool or "").startswith("mcp__")
    ]
    by = {(c.extra["kind"], c.extra["grant"] != ()): c.expect.kind for c in cells}
    for kind in registries.origin_kinds():
        assert (kind, False) in by, f"origin {kind!r}: no MCP tool cell"
    assert by[("operator", False)] == "allowed"
    for outside in ("peer", "channel"):
        assert (by[(outside, False)], by[(outside, True)]) == ("refused", "allowed"), outside


def test_every_origin_kind_has_a_cell_for_every_kind_of_context() -> None:
    """ADR 0059: what a turn of each origin is given from memory and keeps at compaction;
    the operator's turn is given its own and granted records, an outside origin's only
    when its grant names memory_recall (memory_store for facts), an ungranted namespace
    never."""
    cells = [c for c in all_cells() if c.boundary == "recalled_memory"]
    have = {(c.extra["kind"], c.action) for c in cells}
    for kind in registries.origin_kinds():
        for case in CONTEXT_CASES:
            assert (kind, case) in have, f"origin {kind!r} x {case!r}: no context cell"
    for cell in cells:
        if cell.action == "an ungranted namespace":
            assert cell.expect.kind == "refused", cell.key
        if not cell.extra["grant"] and cell.extra["kind"] != "operator":
            assert cell.expect.kind == "refused", cell.key


# What the daemon reaching an endpoint for an agent must be shown not to do (ADR 0054), for
# every risk level: reach an endpoint the agent's profile does not list, or give the agent
# the adapter's key; and a readonly agent never runs a capability that writes outside.
HTTP_ADAPTER_ROWS = {
    "endpoint not in the profile": "endpoint_not_allowed",
    "adapter key in the agent's environment": "not_in_environment",
    "MCP server over HTTP: endpoint not in the profile": None,  # readonly: refused earlier
}


def test_every_risk_level_has_the_http_adapter_rows() -> None:
    cells = {(c.case, c.profile): c.expect for c in all_cells() if c.path == "http_adapter"}
    for case, code in HTTP_ADAPTER_ROWS.items():
        for level, profile in LEVEL_PROFILES.items():
            expect = cells.get((case, profile))
            assert expect is not None, f"HTTP adapter row {case!r}: no cell for {level}"
            assert expect.kind == "refused", (case, profile)
            if code is not None:
                assert expect.code == code, (case, profile)
    writes = "writes_external capability"
    assert cells[(writes, "readonly")].code == "read_only_profile"
    assert cells[(writes, "supervised_deny")].code == "approval_denied"
    assert cells[(writes, "full")].kind == "allowed"


def test_every_kind_of_adapter_an_agent_invokes_has_cells() -> None:
    """A kind `invoke_adapter` runs (zeroclaw.discovery.CALLABLE_KINDS) with no cells fails
    here: CLI adapters in the grammar cells, what the daemon reaches over HTTP in its own."""
    kinds = {
        c.extra.get("adapter_kind", "cli_adapter")
        for c in all_cells()
        if c.tool == "invoke_adapter" and c.path in ("grammar/daemon", "http_adapter")
    }
    missing = registries.callable_adapter_kinds() - kinds
    assert not missing, f"adapter kinds without a conformance cell: {sorted(missing)}"
