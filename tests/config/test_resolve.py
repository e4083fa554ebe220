"""Pure resolution: channel ownership, peer sets, workspaces, effective risk policy, paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zeroclaw.config import (
    Config,
    channel_matches,
    channel_owners,
    channel_peers,
    daemon_paths,
    default_owner,
    effective_risk_policy,
    normalize_peer_name,
    validate_document,
    workspace_path,
)

ENV = {"HOME": "/home/op"}
BASE = Path("/srv/zc")


def load(doc: dict[str, Any], env: dict[str, str] | None = None) -> Config:
    return validate_document(doc, base_dir=BASE, env=env or ENV)


def agent(**extra: Any) -> dict[str, Any]:
    return {
        "model_provider": "offline.default",
        "risk_profile": "sup",
        "runtime_profile": "default",
        **extra,
    }


def bare(
    agents: dict[str, Any], groups: dict[str, Any] | None = None, **tables: Any
) -> dict[str, Any]:
    return {
        "providers": {"offline": {"default": {}}},
        "risk_profiles": {"sup": {"level": "supervised"}},
        "runtime_profiles": {"default": {}},
        "channels": tables.pop("channels", {"cli": {"local": {}, "ops": {}}}),
        "agents": agents,
        "peer_groups": groups or {},
        **tables,
    }


# --------------------------------------------------------------------------- ownership


def test_bound_agents_own_their_channels() -> None:
    cfg = load(
        bare({"a": agent(channels=["cli.local"]), "b": agent(channels=["cli.local", "cli.ops"])})
    )
    assert channel_owners(cfg) == {"cli.local": ("a", "b"), "cli.ops": ("b",)}


def test_unbound_channel_has_no_owner_when_others_are_bound() -> None:
    cfg = load(bare({"a": agent(channels=["cli.local"]), "b": agent()}))
    assert channel_owners(cfg) == {"cli.local": ("a",), "cli.ops": ()}


def test_disabled_agents_own_nothing() -> None:
    cfg = load(
        bare({"a": agent(channels=["cli.local"], enabled=False), "b": agent(channels=["cli.ops"])})
    )
    assert channel_owners(cfg) == {"cli.local": (), "cli.ops": ("b",)}


def test_fallback_prefers_default_alias() -> None:
    cfg = load(bare({"aaa": agent(), "default": agent(), "zed": agent()}))
    assert default_owner(cfg) == "default"
    assert channel_owners(cfg) == {"cli.local": ("default",), "cli.ops": ("default",)}


def test_fallback_skips_disabled_default() -> None:
    cfg = load(bare({"zed": agent(), "default": {"enabled": False}, "mid": agent()}))
    assert channel_owners(cfg) == {"cli.local": ("mid",), "cli.ops": ("mid",)}


def test_fallback_with_no_enabled_agent_owns_nothing() -> None:
    cfg = load(bare({"a": {"enabled": False}}))
    assert channel_owners(cfg) == {"cli.local": (), "cli.ops": ()}


def test_fallback_is_deterministic_across_declaration_order() -> None:
    one = load(bare({"b": agent(), "a": agent(), "c": agent()}))
    two = load(bare({"c": agent(), "a": agent(), "b": agent()}))
    assert channel_owners(one) == channel_owners(two) == {"cli.local": ("a",), "cli.ops": ("a",)}


# --------------------------------------------------------------------------- peers


@pytest.mark.parametrize(
    ("group_channel", "channel", "expected"),
    [
        ("cli", "cli.local", True),
        ("cli", "webhook.x", False),
        ("cli.local", "cli.local", True),
        ("cli.local", "cli.ops", False),
        ("cl", "cli.local", False),
    ],
)
def test_channel_matches(group_channel: str, channel: str, expected: bool) -> None:
    assert channel_matches(group_channel, channel) is expected


def test_membership_is_mutual_and_channel_scoped() -> None:
    cfg = load(
        bare(
            {
                "a": agent(channels=["cli.local", "cli.ops"]),
                "b": agent(channels=["cli.local"]),
                "c": agent(channels=["cli.ops"]),
            },
            {
                "g1": {"channel": "cli.local", "agents": ["a", "b"]},
                "g2": {"channel": "cli.ops", "agents": ["a", "c"]},
            },
        )
    )
    assert channel_peers(cfg, "a", "cli.local").agents == {"b"}
    assert channel_peers(cfg, "b", "cli.local").agents == {"a"}
    assert channel_peers(cfg, "a", "cli.ops").agents == {"c"}
    assert channel_peers(cfg, "b", "cli.ops").agents == frozenset()
    assert channel_peers(cfg, "c", "cli.local").agents == frozenset()


def test_bare_type_group_covers_every_channel_of_the_type() -> None:
    cfg = load(
        bare(
            {"a": agent(channels=["cli.local", "cli.ops"]), "b": agent(channels=["cli.ops"])},
            {"g": {"channel": "cli", "agents": ["a", "b"]}},
        )
    )
    assert channel_peers(cfg, "a", "cli.local").agents == {"b"}
    assert channel_peers(cfg, "a", "cli.ops").groups == ("g",)


def test_agent_in_no_group_has_no_peers() -> None:
    cfg = load(
        bare(
            {
                "a": agent(channels=["cli.local"]),
                "b": agent(channels=["cli.local"]),
                "lone": agent(channels=["cli.local"]),
            },
            {"g": {"channel": "cli", "agents": ["a", "b"]}},
        )
    )
    peers = channel_peers(cfg, "lone", "cli.local")
    assert peers.agents == frozenset() and peers.groups == ()
    assert not peers.external.accepts("anyone")


@pytest.mark.parametrize(
    ("raw", "norm"),
    # "@@x" is "x": normalised once, a name stays itself when normalised again (ADR 0041)
    [("@Alice", "alice"), ("ALICE", "alice"), (" @bob ", "bob"), ("@@x", "x"), ("", "")],
)
def test_normalize_peer_name(raw: str, norm: str) -> None:
    assert normalize_peer_name(raw) == norm
    assert normalize_peer_name(norm) == norm


def _external(
    external: list[str], ignore: list[str] | None = None, extra_group: dict[str, Any] | None = None
) -> Any:
    groups = {
        "g": {"channel": "cli", "agents": ["a"], "external_peers": external, "ignore": ignore or []}
    }
    if extra_group:
        groups["h"] = extra_group
    cfg = load(bare({"a": agent(channels=["cli.local"])}, groups))
    return channel_peers(cfg, "a", "cli.local").external


def test_external_peers_are_deny_by_default() -> None:
    assert not _external([]).accepts("alice")


def test_external_peers_case_insensitive_and_at_stripped() -> None:
    rule = _external(["@Alice"])
    assert rule.accepts("alice") and rule.accepts("@ALICE") and not rule.accepts("bob")


def test_star_accepts_anyone_but_ignored() -> None:
    rule = _external(["*"], ignore=["@Spam"])
    assert rule.accepts("alice") and not rule.accepts("spam") and not rule.accepts("@SPAM")


def test_ignore_in_one_group_beats_allowance_in_another() -> None:
    rule = _external(
        ["bob"], extra_group={"channel": "cli.local", "agents": ["a"], "ignore": ["BOB"]}
    )
    assert not rule.accepts("bob")


def test_empty_sender_never_accepted() -> None:
    assert not _external(["*"]).accepts(" @ ")


# --------------------------------------------------------------------------- workspaces and paths


def test_workspace_default_and_explicit() -> None:
    cfg = load(
        bare(
            {
                "a": agent(),
                "b": agent(workspace={"path": "ws/b"}),
                "c": agent(workspace={"path": "/abs/c"}),
            },
            daemon={"state_dir": "/var/lib/zc"},
        )
    )
    paths = daemon_paths(cfg, ENV)
    assert workspace_path(cfg, "a", paths) == Path("/var/lib/zc/agents/a/workspace")
    assert workspace_path(cfg, "b", paths) == BASE / "ws" / "b"
    assert workspace_path(cfg, "c", paths) == Path("/abs/c")


def test_workspace_tilde_expands() -> None:
    cfg = load(bare({"a": agent(workspace={"path": "~/ws/a"})}))
    assert workspace_path(cfg, "a", daemon_paths(cfg, ENV)) == Path.home() / "ws" / "a"


@pytest.mark.parametrize(
    ("env", "state", "runtime"),
    [
        ({"HOME": "/h"}, "/h/.local/state/zeroclaw", "/h/.local/state/zeroclaw/run"),
        (
            {"HOME": "/h", "XDG_STATE_HOME": "/xs", "XDG_RUNTIME_DIR": "/run/user/1"},
            "/xs/zeroclaw",
            "/run/user/1/zeroclaw",
        ),
        (
            {
                "STATE_DIRECTORY": "/var/lib/zeroclaw:/other",
                "RUNTIME_DIRECTORY": "/run/zeroclaw",
                "XDG_STATE_HOME": "/xs",
            },
            "/var/lib/zeroclaw",
            "/run/zeroclaw",
        ),
    ],
)
def test_daemon_paths_precedence(env: dict[str, str], state: str, runtime: str) -> None:
    cfg = load(bare({"a": agent()}), env)
    paths = daemon_paths(cfg, env)
    assert (str(paths.state_dir), str(paths.runtime_dir)) == (state, runtime)


def test_daemon_paths_from_file_win_and_are_relative_to_it() -> None:
    cfg = load(bare({"a": agent()}, daemon={"state_dir": "st", "runtime_dir": "/r"}))
    paths = daemon_paths(cfg, {"STATE_DIRECTORY": "/nope"})
    assert paths.state_dir == BASE / "st" and paths.runtime_dir == Path("/r")


# --------------------------------------------------------------------------- effective risk


def _policy(level: str, **profile: Any) -> Any:
    doc = bare({"a": agent(**profile.pop("agent", {}))})
    doc["risk_profiles"]["sup"] = {"level": level, **profile}
    return effective_risk_policy(load(doc), "a", ENV, BASE)


def test_full_drops_workspace_only_keeps_forbidden_paths() -> None:
    policy = _policy("full", workspace_only=True, forbidden_paths=["/etc", "~/.ssh", "rel"])
    assert policy.workspace_only is False
    assert policy.forbidden_paths == (Path("/etc"), Path("/home/op/.ssh"), BASE / "rel")


def test_supervised_keeps_workspace_only_and_asks() -> None:
    policy = _policy("supervised")
    assert policy.workspace_only and policy.asks_approval and policy.may_write


def test_supervised_without_approval_flag_does_not_ask() -> None:
    assert not _policy("supervised", require_approval_for_medium_risk=False).asks_approval


def test_readonly_refuses_writes_and_shell() -> None:
    policy = _policy("readonly", allowed_commands=["ls"])
    assert not policy.may_write and not policy.may_run_shell and policy.workspace_only


def test_unrestricted_filesystem_drops_workspace_only_only() -> None:
    policy = _policy("readonly", agent={"workspace": {"unrestricted_filesystem": True}})
    assert not policy.workspace_only and not policy.may_write and policy.forbidden_paths


def test_workspace_only_false_in_profile_is_honoured() -> None:
    assert not _policy("supervised", workspace_only=False).workspace_only
