"""The matrix covers everything the product declares: a new tool, channel type, control
command, bus service, risk level or grant mode without conformance cells fails here."""

from __future__ import annotations

from tests.conformance import _registries as registries
from tests.conformance._matrix import (
    BOUNDARIES,
    CHANNEL_PATHS,
    GRANT_PROFILES,
    LEVEL_PROFILES,
    PATHS,
    PROFILES,
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


def test_every_boundary_has_cells() -> None:
    boundaries = {c.boundary for c in all_cells()}
    missing = set(BOUNDARIES) - boundaries
    assert not missing, f"boundaries without cells: {sorted(missing)}"


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
