"""The daemon's own files, refused to every agent under every profile (ADR 0015): the
path policy on a real tree, and the Landlock plan that never grants them."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO
from zeroclaw.agent import AgentSpec
from zeroclaw.agent._turn import Reach, TurnEngine
from zeroclaw.config import validate_document
from zeroclaw.policy import abi_version, check_path, decide, rules_for
from zeroclaw.policy._landlock import (
    READ_FILE,
    PathSet,
    grant_around,
    plan_for,
    split_directories,
)
from zeroclaw.policy._paths import protected_root
from zeroclaw.providers._offline import OfflineProvider
from zeroclaw.supervisor._spec import build_specs

PROFILES = {  # agent alias -> (risk profile, unrestricted_filesystem)
    "ro": ("readonly", False),
    "sup": ("supervised", False),
    "full": ("full", False),
    "wide": ("supervised", True),
}


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A second "daemon" process (the zygote's stand-in) with a live /proc entry."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """A daemon's files on disk: config, state dir with memory and default workspaces,
    runtime dir with its sockets, and a symlink from a workspace into the memory."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "zeroclaw.toml").write_text("# the daemon's config")
    (tmp_path / "state" / "memory").mkdir(parents=True)
    (tmp_path / "state" / "memory" / "data.mdb").write_text("every agent's memory")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "control.sock").write_text("")
    for alias in PROFILES:
        ws = tmp_path / "state" / "agents" / alias / "workspace"
        ws.mkdir(parents=True)
        (ws / "own.txt").write_text(alias)
        os.symlink(tmp_path / "state" / "memory", ws / "to-memory")
    return tmp_path


def specs(layout: Path, daemon_pids: tuple[int, ...]) -> dict[str, AgentSpec]:
    agents: dict[str, Any] = {}
    for alias, (level, unrestricted) in PROFILES.items():
        agents[alias] = {
            "model_provider": "offline.default",
            "risk_profile": level,
            "runtime_profile": "default",
            "workspace": {"unrestricted_filesystem": unrestricted},
        }
    agents["sup"]["workspace"]["access"] = {"ro": "read"}
    doc = {
        "daemon": {"state_dir": str(layout / "state"), "runtime_dir": str(layout / "run")},
        "providers": {"offline": {"default": {}}},
        # Nothing forbidden by the operator: the daemon's files are protected regardless.
        "risk_profiles": {
            level: {"level": level, "forbidden_paths": []}
            for level in ("readonly", "supervised", "full")
        },
        "runtime_profiles": {"default": {}},
        "agents": agents,
    }
    config_path = layout / "etc" / "zeroclaw.toml"
    config = validate_document(doc, base_dir=config_path.parent, env={})
    return build_specs(
        config, {}, config_path.parent, config_path=config_path, daemon_pids=daemon_pids
    )


def engine(spec: AgentSpec) -> TurnEngine:
    """The agent's rules exactly as its turn engine builds them."""
    return TurnEngine(spec, cast(Reach, None), OfflineProvider(), agent_env={})


@pytest.mark.parametrize("alias", sorted(PROFILES))
def test_every_profile_is_refused_the_daemons_files(layout: Path, sleeper: int, alias: str) -> None:
    me = os.getpid()
    spec = specs(layout, (me, sleeper))[alias]
    rules = engine(spec).rules
    state, run = layout / "state", layout / "run"
    refused = [
        (f"{state}/memory/data.mdb", "read"),
        (f"{state}/memory/data.mdb", "write"),
        (f"{state}/memory", "read"),
        (f"{state}", "read"),
        (f"{state}/agents", "read"),
        (f"{state}/planted.txt", "write"),
        (f"{run}/control.sock", "read"),
        (f"{run}/planted.sock", "write"),
        (f"{layout}/etc/zeroclaw.toml", "read"),
        (f"{layout}/etc/zeroclaw.toml", "write"),
        (f"/proc/{me}/environ", "read"),
        (f"/proc/{sleeper}/environ", "read"),
        (f"/proc/{sleeper}/root{state}/memory/data.mdb", "read"),
        ("/proc/self/environ", "read"),  # this test process plays the daemon here
        ("to-memory/data.mdb", "read"),  # a symlink in its own workspace
        ("../../../memory/data.mdb", "read"),
    ]
    for path, access in refused:
        decision = check_path(rules, path, access)  # type: ignore[arg-type]
        assert decision.code == "forbidden_path", (alias, path, access, decision)
    # Its own workspace (inside the state dir) stays its own.
    assert check_path(rules, "own.txt", "read").allowed
    expected = "read_only_profile" if alias == "ro" else None
    assert check_path(rules, "new.txt", "write").code == expected
    # Other workspaces keep their own refusal, grants their allowance.
    other = state / "agents" / ("full" if alias != "full" else "sup") / "workspace" / "own.txt"
    assert check_path(rules, str(other), "read").code == "path_not_allowed"
    if alias == "sup":
        assert check_path(rules, f"{state}/agents/ro/workspace/own.txt", "read").allowed
    # And `full` still reaches the rest of the machine.
    if alias in ("full", "wide"):
        assert check_path(rules, "/usr/bin/env", "read").allowed


def test_a_thread_of_the_daemon_is_the_daemon(layout: Path) -> None:
    """Every thread has its own /proc/<tid> entry with the process's environ."""
    started, release = threading.Event(), threading.Event()
    tids: list[int] = []

    def park() -> None:
        tids.append(threading.get_native_id())
        started.set()
        release.wait(30)

    thread = threading.Thread(target=park)
    thread.start()
    try:
        started.wait(30)
        rules = engine(specs(layout, (os.getpid(),))["full"]).rules
        decision = check_path(rules, f"/proc/{tids[0]}/environ", "read")
        assert decision.code == "forbidden_path", decision
    finally:
        release.set()
        thread.join()


def test_the_specs_carry_the_protected_paths(layout: Path) -> None:
    spec = specs(layout, (11, 22))["sup"]
    etc = layout / "etc"
    assert spec.protected_paths == (
        str(layout / "state"),
        str(layout / "run"),
        str(etc / "zeroclaw.toml"),
        # What decides what runs with which variables (issue 15): bundles and manifests.
        str(etc / "subagents"),
        str(etc / "adapters"),
        str(etc / "capabilities"),
        str(etc / "mcp"),
        str(etc / "env"),  # the unit's EnvironmentFile= (the README's): every provider key
        "/proc/11",
        "/proc/22",
    )
    assert spec.peer_tools == ()


def test_a_full_agent_may_not_rewrite_a_manifest_beside_the_config(layout: Path) -> None:
    """An agent that rewrote adapters/*.yaml could hand an adapter the daemon's keys."""
    rules = engine(specs(layout, ())["full"]).rules
    for name in ("adapters/reviewer.yaml", "mcp/gh.yaml", "subagents/x/agent.yaml"):
        decision = check_path(rules, str(layout / "etc" / name), "write")
        assert decision.code == "forbidden_path", (name, decision)


def test_a_full_agent_may_not_read_the_environment_file_beside_the_config(layout: Path) -> None:
    """The README puts provider keys (and the metrics token) in EnvironmentFile=
    /etc/zeroclaw/env, beside the system config; a `full` agent of a root daemon read them
    (found by the attack pass)."""
    (layout / "etc" / "env").write_text("OPENAI_API_KEY=sk-secret\n")
    rules = engine(specs(layout, ())["full"]).rules
    for op in ("read", "write"):
        decision = check_path(rules, str(layout / "etc" / "env"), op)
        assert decision.code == "forbidden_path", (op, decision)


P = PurePosixPath


@pytest.mark.parametrize(
    ("real", "workspaces", "expected"),
    [
        ("/s/memory/data.mdb", ["/s/agents/a/workspace"], "/s"),
        ("/s/agents/a/workspace/x", ["/s/agents/a/workspace"], None),  # carved out
        ("/s/agents/b/x", ["/s/agents/a/workspace"], "/s"),  # no workspace there
        ("/s", ["/s"], "/s"),  # a workspace equal to the state dir carves nothing out
        ("/w/zeroclaw.toml", ["/w"], "/w/zeroclaw.toml"),  # protected inside a workspace
        ("/elsewhere", ["/s/agents/a/workspace"], None),
        ("/proc/7/environ", [], "/proc/7"),
        ("/proc/70/environ", [], None),
    ],
)
def test_protected_root_carves_out_workspaces_inside_only(
    real: str, workspaces: list[str], expected: str | None
) -> None:
    protected = [P("/s"), P("/w/zeroclaw.toml"), P("/proc/7")]
    found = protected_root(P(real), protected, [P(w) for w in workspaces])
    assert found == (None if expected is None else P(expected))


# --------------------------------------------------------------------------- Landlock plan

FAKE_TREE = {
    "/etc": ["hosts", "ssl", "zeroclaw", "evil-link", "loop"],
    "/etc/zeroclaw": ["other.toml", "zeroclaw.toml"],
    "/etc/ssl": ["certs"],
}
FAKE_LINKS = {"/etc/evil-link": "/var/lib/zeroclaw/memory", "/etc/loop": "/etc"}


def fake_entries(path: str) -> list[str]:
    return FAKE_TREE.get(path, [])


def fake_resolve(path: str) -> str:
    return FAKE_LINKS.get(path, path)


def test_grant_around_splits_only_along_the_way_to_a_protected_path() -> None:
    protected = ["/etc/zeroclaw/zeroclaw.toml", "/var/lib/zeroclaw"]
    got = grant_around("/etc", protected, fake_entries, fake_resolve)
    assert got == ("/etc/hosts", "/etc/ssl", "/etc/zeroclaw/other.toml")  # no evil-link
    assert grant_around("/usr", protected, fake_entries, fake_resolve) == ("/usr",)
    assert grant_around("/var/lib/zeroclaw/x", protected, fake_entries, fake_resolve) == ()
    assert grant_around("/etc/zeroclaw/zeroclaw.toml", protected, fake_entries) == ()


_PARTS = st.lists(st.sampled_from(["a", "b", "ab", "c"]), max_size=4)
_PATHS = _PARTS.map(lambda parts: str(PurePosixPath("/", *parts)))


def _beneath(path: str, root: str) -> bool:
    """The definition: `root` is `path` or one of its ancestors."""
    return (
        PurePosixPath(path) == PurePosixPath(root)
        or PurePosixPath(root) in PurePosixPath(path).parents
    )


@settings(max_examples=300, deadline=None)
@given(roots=st.lists(_PATHS, max_size=6), path=_PATHS)
def test_a_path_set_answers_as_a_scan_of_every_root_would(roots: list[str], path: str) -> None:
    """Every agent's plan keeps out every other agent's workspace: with 1,100 agents each
    start scanned ~1,100 roots per candidate (0.3 s). The set answers in a path's depth,
    and the same: `covers` (at or beneath a root), `holds` (a root at or beneath it)."""
    kept = PathSet(roots)
    assert kept.covers(PurePosixPath(path)) == any(_beneath(path, r) for r in roots)
    assert kept.holds(PurePosixPath(path)) == any(_beneath(r, path) for r in roots)
    outermost = [str(PurePosixPath(*parts)) for parts in kept.roots]
    assert all(any(_beneath(r, o) for o in outermost) for r in roots)


def test_grant_around_and_the_split_dirs_ignore_roots_beneath_another() -> None:
    """One workspace per agent under the protected state dir: the plan is the state dir's."""
    few = ["/etc/zeroclaw/zeroclaw.toml", "/var/lib/zeroclaw"]
    many = [*few, *(f"/var/lib/zeroclaw/agents/a{i}/workspace" for i in range(1000))]
    for top in ("/etc", "/usr", "/var", "/var/lib"):
        assert grant_around(top, many, fake_entries, fake_resolve) == grant_around(
            top, few, fake_entries, fake_resolve
        )
    assert split_directories("/etc", PathSet(many), fake_resolve) == ("/etc", "/etc/zeroclaw")


def test_the_plan_never_grants_a_protected_path(tmp_path: Path) -> None:
    granted = tmp_path / "system"
    (granted / "zeroclaw").mkdir(parents=True)
    (granted / "zeroclaw" / "zeroclaw.toml").write_text("")
    (granted / "zeroclaw" / "keep.txt").write_text("")
    (granted / "lib").mkdir()
    config = granted / "zeroclaw" / "zeroclaw.toml"
    plan = plan_for(str(tmp_path / "ws"), extra_read=[str(granted)], protected=[str(config)])
    paths = [p for p, rights in plan.rules if rights & READ_FILE]  # a split dir is only listed
    assert str(granted) not in paths and str(config) not in paths
    assert str(granted / "lib") in paths and str(granted / "zeroclaw" / "keep.txt") in paths


SANDBOXED_READ = """
import json, sys
from zeroclaw.policy import apply_sandbox, plan_for
workspace, granted, protected, *targets = sys.argv[1:]
apply_sandbox(plan_for(workspace, extra_read=[granted], protected=[protected]))
out = {}
for target in targets:
    try:
        open(target).read()
        out[target] = "read"
    except OSError:
        out[target] = "denied"
print(json.dumps(out))
"""


@pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")
def test_the_kernel_refuses_a_protected_file_under_a_granted_tree(tmp_path: Path) -> None:
    """The config file under a granted system path (/etc/zeroclaw/zeroclaw.toml under
    /etc): its siblings stay readable, it does not."""
    import json

    granted = tmp_path / "system"
    (granted / "zeroclaw").mkdir(parents=True)
    (tmp_path / "ws").mkdir()
    config = granted / "zeroclaw" / "zeroclaw.toml"
    config.write_text("secret config")
    sibling = granted / "zeroclaw" / "other.toml"
    sibling.write_text("fine")
    (granted / "hosts").write_text("fine")
    targets = [str(config), str(sibling), str(granted / "hosts")]
    setup = [str(tmp_path / "ws"), str(granted), str(config)]
    result = subprocess.run(
        [sys.executable, "-c", SANDBOXED_READ, *setup, *targets],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        str(config): "denied",
        str(sibling): "read",
        str(granted / "hosts"): "read",
    }


SEGMENTS = st.sampled_from(["..", ".", "agents", "memory", "data.mdb", "workspace", "run", "x"])
SEGMENTS_ALIAS = st.one_of(SEGMENTS, st.sampled_from(sorted(PROFILES)))


@settings(max_examples=200, deadline=None)
@given(
    alias=st.sampled_from(sorted(PROFILES)),
    access=st.sampled_from(["read", "write"]),
    start=st.sampled_from(["/d/state", "/d/run", "/d", "/d/state/agents"]),
    parts=st.lists(SEGMENTS_ALIAS, max_size=6),
)
def test_nothing_under_a_daemon_path_is_allowed_outside_a_workspace(
    alias: str, access: str, start: str, parts: list[str]
) -> None:
    """Whatever the profile and however the path is spelled: an allowed path under the
    state or runtime dir or the config file lies in the agent's own or a granted workspace."""
    protected = ("/d/state", "/d/run", "/d/zeroclaw.toml", "/proc/1")
    level, unrestricted = PROFILES[alias]
    rules = rules_for(
        f"/d/state/agents/{alias}/workspace",
        workspace_only=level != "full" and not unrestricted,
        may_write=level != "readonly",
        grants=[("ro", "/d/state/agents/ro/workspace", "read")] if alias == "sup" else [],
        other_workspaces=[f"/d/state/agents/{a}/workspace" for a in PROFILES if a != alias],
        protected=protected,
        resolve=os.path.normpath,
    )
    real = PurePosixPath(os.path.normpath("/".join([start, *parts])))
    decision = decide(rules, real, access)  # type: ignore[arg-type]

    def inside(roots: list[PurePosixPath]) -> bool:
        return any(real == root or root in real.parents for root in roots)

    usable = [rules.workspace, *(g.path for g in rules.grants)]
    if inside([P(p) for p in protected]):
        if decision.allowed:
            assert inside(usable), decision
        if access == "read" and inside(usable):
            assert decision.allowed, decision
        if not inside([*usable, *rules.other_workspaces]):
            assert decision.code == "forbidden_path", decision
