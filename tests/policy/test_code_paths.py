"""The daemon's own code is read-only to every agent (issue 24, found 7; ADR 0044): which
paths are code (computed purely from the interpreter's facts), the path policy's refusal
of a write there however it is spelled, the Landlock plan that grants no write right under
them (`full`'s complement included), and the config refusal of a workspace inside them."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import types
from pathlib import Path, PurePosixPath

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO
from tests.supervisor.harness import agent_entry, make_config
from zeroclaw.config import daemon_refusals, load_config
from zeroclaw.policy import (
    CODE_PATH_KINDS,
    CodePath,
    InterpreterFacts,
    abi_version,
    check_path,
    code_paths,
    code_roots,
    daemon_code_paths,
    decide_command,
    plan_command_sandbox,
    plan_for,
    rules_for,
)
from zeroclaw.policy._code import (
    editable_sources,
    inside_code,
    interpreter_facts,
    realpath_by_directory,
)
from zeroclaw.policy._landlock import READ_EXEC, READ_FILE

needs_landlock = pytest.mark.skipif(abi_version() < 1, reason="this kernel has no Landlock")


def _venv(tmp_path: Path) -> dict[str, Path]:
    """A synthetic installation: a base Python, a venv beside the agent's workspace (both
    in tmp_path), its site-packages, an editable source checkout and a PYTHONPATH entry."""
    base = tmp_path / "base"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3.11").write_text("#!elf")
    (base / "lib" / "python3.11").mkdir(parents=True)
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3.11")
    src = tmp_path / "checkout" / "zeroclaw"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    extra = tmp_path / "pythonpath"
    extra.mkdir()
    user = tmp_path / "home" / ".local" / "lib" / "python3.11" / "site-packages"
    user.mkdir(parents=True)
    script = tmp_path / "home" / ".local" / "bin" / "zeroclaw"  # `pip install --user`
    script.parent.mkdir(parents=True)
    script.write_text("#!/usr/bin/python3\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    return {
        "base": base,
        "venv": venv,
        "site": site,
        "src": src,
        "extra": extra,
        "user": user,
        "ws": ws,
        "python": venv / "bin" / "python",
        "script": script,
    }


def _facts(t: dict[str, Path], cwd: Path | None = None) -> InterpreterFacts:
    return InterpreterFacts(
        executable=str(t["python"]),
        base_prefix=str(t["base"]),
        prefix=str(t["venv"]),
        exec_prefix=str(t["venv"]),
        site_packages=(str(t["site"]),),
        user_site=str(t["user"]),
        package_dir=str(t["src"]),
        sys_path=(str(t["base"] / "lib" / "python3.11"), str(t["site"]), str(t["extra"])),
        cwd=str(cwd or t["venv"] / "bin"),
        editable_sources=(str(t["src"]),),
        scripts=(str(t["script"]),),
    )


def test_every_kind_is_found_resolved_and_kept_even_before_it_exists(tmp_path: Path) -> None:
    t = _venv(tmp_path)
    facts = _facts(t)
    found = code_paths(facts)
    by_kind = {kind: {p.path for p in found if p.kind == kind} for kind in CODE_PATH_KINDS}
    assert by_kind["interpreter"] == {str(t["base"] / "bin" / "python3.11")}  # the link's target
    assert by_kind["prefix"] == {str(t["venv"])}
    assert by_kind["script"] == {str(t["script"])}
    assert by_kind["site_packages"] == {str(t["site"])}
    assert by_kind["user_site"] == {str(t["user"])}
    assert by_kind["editable_source"] == by_kind["package"] == {str(t["src"])}
    assert str(t["extra"]) in by_kind["sys_path"]
    assert all(by_kind.values()), "every kind has a path in this installation"
    # A user site or a sys.path entry that does not exist yet is kept: an agent that made
    # it would have it read at the next start. A NUL names nothing: no entry.
    missing_user = tmp_path / "no-home" / "site-packages"
    missing_entry = t["extra"] / "later"
    sparse = code_paths(
        InterpreterFacts(
            executable=str(t["python"]),
            base_prefix=str(t["base"]),
            prefix=str(t["venv"]),
            exec_prefix=str(t["venv"]),
            site_packages=(),
            user_site=str(missing_user),
            package_dir=str(t["src"]),
            sys_path=(str(missing_entry), "bad\x00entry"),
            cwd=str(t["venv"]),
        )
    )
    assert CodePath("user_site", str(missing_user)) in sparse
    assert CodePath("sys_path", str(missing_entry)) in sparse
    assert not any("\x00" in p.path for p in sparse)
    rules = rules_for(str(t["ws"]), workspace_only=False, may_write=True, code=code_roots(sparse))
    planted = check_path(rules, str(missing_user / "evil.pth"), "write")
    assert planted.code == "forbidden_path"  # and making the directory itself is refused
    assert check_path(rules, str(missing_user), "write").code == "forbidden_path"


def test_an_empty_or_relative_sys_path_entry_is_the_cwd(tmp_path: Path) -> None:
    """`python -m zeroclaw` puts the cwd first on sys.path: a module planted there would
    shadow a late import, so the cwd is the daemon's code too."""
    t = _venv(tmp_path)
    facts = _facts(t, cwd=tmp_path / "checkout")
    facts = InterpreterFacts(**{**vars_of(facts), "sys_path": ("", "zeroclaw")})
    found = {p.path for p in code_paths(facts) if p.kind == "sys_path"}
    assert found == {str(tmp_path / "checkout"), str(t["src"])}


def vars_of(facts: InterpreterFacts) -> dict[str, object]:
    return {name: getattr(facts, name) for name in facts.__slots__}


def test_the_pure_computation_uses_only_what_it_is_given() -> None:
    """Driven with injected lookups: no filesystem at all."""
    facts = InterpreterFacts(
        executable="/opt/py/bin/python",
        base_prefix="/opt/py",
        prefix="/srv/venv",
        exec_prefix="/srv/venv",
        site_packages=("/srv/venv/lib/site-packages",),
        user_site="/home/op/.local/site-packages",
        package_dir="/src/zeroclaw",
        sys_path=("/srv/venv/bin",),
        cwd="/",
        editable_sources=("/src/zeroclaw",),
    )
    found = code_paths(facts, resolve=lambda p: p.replace("/opt/py", "/real/py"))
    assert CodePath("interpreter", "/real/py/bin/python") in found
    assert code_roots(found) == (
        "/home/op/.local/site-packages",
        "/real/py",
        "/src/zeroclaw",
        "/srv/venv",
    )


def test_the_editable_finder_mapping_is_read_from_its_module() -> None:
    finder_module = types.ModuleType("__editable___zeroclaw_0_1_0_finder")
    finder_module.MAPPING = {"zeroclaw": "/src/zeroclaw"}  # type: ignore[attr-defined]
    finder_module.NAMESPACES = {"ns": ["/src/ns"]}  # type: ignore[attr-defined]
    other = types.ModuleType("somebody_elses_finder")
    other.MAPPING = {"x": "/elsewhere"}  # type: ignore[attr-defined]

    class Finder:
        pass

    class Other:
        pass

    Finder.__module__ = finder_module.__name__
    Other.__module__ = other.__name__
    modules = {finder_module.__name__: finder_module, other.__name__: other}
    assert editable_sources([Finder, Other], modules) == ("/src/zeroclaw", "/src/ns")


def test_this_interpreter_names_its_package_and_site_packages() -> None:
    facts = interpreter_facts()
    assert facts.package_dir == str(REPO / "zeroclaw")
    kinds = {p.kind for p in daemon_code_paths()}
    assert {"interpreter", "prefix", "site_packages", "package"} <= kinds


# ---------------------------------------------------------------- the path policy


def _spellings(t: dict[str, Path]) -> dict[str, str]:
    """Every way an agent could name a file in the daemon's code (workspace: t["ws"])."""
    ws = t["ws"]
    (ws / "to-site").symlink_to(t["site"])
    (ws / "to-pkg").symlink_to(t["src"])
    (ws / "to-python").symlink_to(t["python"])
    site_rel = os.path.relpath(t["site"], ws)
    return {
        "pth in site-packages": str(t["site"] / "evil.pth"),
        "module in the package dir": str(t["src"] / "memory.py"),
        "package __init__": str(t["src"] / "__init__.py"),
        "script in the venv bin": str(t["venv"] / "bin" / "zeroclaw"),
        "the venv python (a symlink)": str(t["python"]),
        "the interpreter itself": str(t["base"] / "bin" / "python3.11"),
        "the standard library": str(t["base"] / "lib" / "python3.11" / "os.py"),
        "a PYTHONPATH entry": str(t["extra"] / "sitecustomize.py"),
        "the user site": str(t["user"] / "usercustomize.pth"),
        "the console script in ~/.local/bin": str(t["script"]),
        "via a workspace symlink": "to-site/evil.pth",
        "via a symlinked package": "to-pkg/_verify.py",
        "via a symlinked interpreter": "to-python",
        "via ..": f"{ws}/../venv/lib/python3.11/site-packages/evil.pth",
        "relative from the workspace": f"{site_rel}/evil.pth",
        "relative dotted": "./../checkout/./zeroclaw/x.py",
        "the site-packages dir itself": str(t["site"]),
    }


PROFILES = {  # (workspace_only, may_write)
    "readonly": (True, False),
    "supervised": (True, True),
    "full": (False, True),
    "unrestricted readonly": (False, False),
}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_no_profile_may_write_the_daemons_code_however_spelled(
    tmp_path: Path, profile: str
) -> None:
    t = _venv(tmp_path)
    code = code_roots(code_paths(_facts(t)))
    workspace_only, may_write = PROFILES[profile]
    rules = rules_for(str(t["ws"]), workspace_only=workspace_only, may_write=may_write, code=code)
    for case, spelled in _spellings(t).items():
        decision = check_path(rules, spelled, "write")
        assert (decision.allowed, decision.code) == (False, "forbidden_path"), (case, decision)
        assert "daemon's own code" in decision.reason
        assert str(t["site"]) not in decision.reason or spelled.startswith(str(t["site"]))
    # Reading is not writing: full still reads its code; its own workspace stays writable.
    read = check_path(rules, str(t["site"] / "evil.pth"), "read")
    assert read.allowed is (not workspace_only)
    assert check_path(rules, "mine.txt", "write").allowed is may_write


def test_a_code_path_inside_a_workspace_stays_read_only(tmp_path: Path) -> None:
    t = _venv(tmp_path)
    rules = rules_for(
        str(tmp_path), workspace_only=True, may_write=True, code=code_roots(code_paths(_facts(t)))
    )
    assert check_path(rules, str(t["site"] / "evil.pth"), "write").code == "forbidden_path"
    assert check_path(rules, str(t["site"] / "evil.pth"), "read").allowed
    assert check_path(rules, "ws/notes.txt", "write").allowed


# ---------------------------------------------------------------- the kernel plan


def _write_rules_over(path: Path, rules: tuple[tuple[str, int], ...]) -> list[str]:
    """Rules that give a write right on `path` (a rule covers everything beneath it)."""
    p = PurePosixPath(os.path.realpath(path))
    return [
        granted
        for granted, rights in rules
        if rights & ~READ_EXEC
        and (p == PurePosixPath(granted) or PurePosixPath(granted) in p.parents)
    ]


@pytest.mark.parametrize("anywhere", [False, True])
def test_the_plan_grants_no_write_under_the_code_and_keeps_it_readable(
    tmp_path: Path, anywhere: bool
) -> None:
    """`full` (anywhere): the complement ruleset is split around every code path, which
    then gets read and execute only; a workspace holding a code path is split too."""
    t = _venv(tmp_path)
    code = code_roots(code_paths(_facts(t)))
    for workspace in (t["ws"], tmp_path):  # beside the venv; holding it
        plan = plan_for(
            str(workspace), [(str(tmp_path), "read_write")], anywhere=anywhere, code=code
        )
        for target in (t["site"] / "evil.pth", t["src"] / "x.py", t["python"], t["user"]):
            assert _write_rules_over(target, plan.rules) == [], (workspace, target)
            readable = [
                r
                for g, r in plan.rules
                if r & READ_FILE
                and PurePosixPath(g) in (*PurePosixPath(os.path.realpath(target)).parents,)
            ] or [r for g, r in plan.rules if g == os.path.realpath(target)]
            assert readable, (workspace, target)
        assert _write_rules_over(t["ws"] / "notes.txt", plan.rules), "its workspace stays writable"


SANDBOXED = """
import json, os, sys
from zeroclaw.policy import apply_sandbox, plan_for
workspace, *code = sys.argv[1:]
targets = json.loads(os.environ["TARGETS"])
apply_sandbox(plan_for(workspace, anywhere=True, code=code))
out = {}
for name, target in targets.items():
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
        out[name] = "written"
    except OSError as exc:
        out[name] = os.strerror(exc.errno)
with open(code[0] + "/readable.py") as fh:
    out["read"] = fh.read()
print(json.dumps(out))
"""


@needs_landlock
def test_the_kernel_refuses_full_a_write_into_the_code(tmp_path: Path) -> None:
    """A real process under `full`'s ruleset: creating a .pth in site-packages, a module
    in the package dir or replacing the interpreter is EACCES; reading code works, and
    writing beside the venv (outside the workspace) still works, as `full` promises."""
    t = _venv(tmp_path)
    (t["site"] / "readable.py").write_text("code")
    later = tmp_path / "later" / "site-packages"  # a code path that does not exist yet
    code = code_roots([*code_paths(_facts(t)), CodePath("user_site", str(later))])
    targets = {
        "later": str(tmp_path / "later"),  # its first missing component, made as a file
        "pth": str(t["site"] / "evil.pth"),
        "module": str(t["src"] / "planted.py"),
        "interpreter": str(t["base"] / "bin" / "python3.11"),
        "script": str(t["script"]),
        "beside the script": str(t["script"].parent / "zeroclaw-new"),
        "beside": str(tmp_path / "ws" / "fine.txt"),
    }
    result = subprocess.run(
        [sys.executable, "-c", SANDBOXED, str(t["ws"]), str(t["site"]), *code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "TARGETS": json.dumps(targets)},
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    denied = os.strerror(errno.EACCES)
    assert json.loads(result.stdout) == {
        "later": denied,
        "pth": denied,
        "module": denied,
        "interpreter": denied,
        "script": denied,
        "beside the script": denied,
        "beside": "written",
        "read": "code",
    }
    assert not (t["site"] / "evil.pth").exists() and not (t["src"] / "planted.py").exists()


# ---------------------------------------------------------------- the config refusal


def _config(tmp_path: Path, workspace: Path) -> Path:
    doc = make_config(tmp_path, {"a": agent_entry(workspace={"path": str(workspace)})})
    path = tmp_path / "zeroclaw.toml"
    path.write_text(tomli_w.dumps(doc))
    return path


def test_a_workspace_inside_the_code_is_refused_and_one_holding_it_is_not(tmp_path: Path) -> None:
    t = _venv(tmp_path / "inst")
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    code = code_roots(code_paths(_facts(t)))
    for inside in (t["site"] / "ws", t["src"], t["venv"]):
        path = _config(cfg, inside)
        issues = daemon_refusals(load_config(path), {}, path, code)
        assert [i.key for i in issues] == ["agents.a.workspace.path"], inside
        assert "inside the daemon's own code" in issues[0].message
    path = _config(cfg, tmp_path / "inst")  # holds the venv: carved out, not refused
    assert daemon_refusals(load_config(path), {}, path, code) == []
    link = tmp_path / "ws-link"
    link.symlink_to(t["site"])  # a symlink to the code is judged where it leads
    path = _config(cfg, link)
    assert daemon_refusals(load_config(path), {}, path, code) != []


def test_a_command_or_adapter_gets_no_write_right_on_code_inside_its_workspace(
    tmp_path: Path,
) -> None:
    """The shell tool's and the daemon's adapter ruleset (plan_command_sandbox): code lying
    in the workspace is carved out of its write grant and only read."""
    t = _venv(tmp_path)
    code = code_roots(code_paths(_facts(t)))
    plan = plan_command_sandbox(
        workspace=str(tmp_path),
        home=str(tmp_path / "command-home"),
        executables=(),
        grants=[(str(t["venv"]), "read_write")],
        code=code,
    )
    for target in (t["site"] / "evil.pth", t["src"] / "x.py", t["python"]):
        assert _write_rules_over(target, plan.rules) == [], target
        assert any(
            r & READ_FILE
            and PurePosixPath(g)
            in (
                PurePosixPath(os.path.realpath(target)),
                *PurePosixPath(os.path.realpath(target)).parents,
            )
            for g, r in plan.rules
        ), target
    assert _write_rules_over(t["ws"] / "notes.txt", plan.rules)


PARTS = ["..", ".", "to-site", "to-pkg", "venv", "lib", "python3.11", "site-packages", "ws"]


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parts=st.lists(st.sampled_from(PARTS), min_size=1, max_size=8),
    name=st.sampled_from(["x.pth", "x.py"]),
)
def test_no_spelling_of_a_write_lands_in_the_code(
    tmp_path: Path, parts: list[str], name: str
) -> None:
    """Whatever the path is made of (`..`, `.`, symlinks into the code, real names): an
    allowed write never resolves under a code path, for the most open profile."""
    t = _tree_once(tmp_path)
    code = code_roots(code_paths(_facts(t)))
    rules = rules_for(str(t["ws"]), workspace_only=False, may_write=True, code=code)
    decision = check_path(rules, os.path.join(*parts, name), "write")
    if decision.allowed:
        assert decision.path is not None
        assert not any(
            decision.path == PurePosixPath(c) or PurePosixPath(c) in decision.path.parents
            for c in code
        ), decision


def _tree_once(tmp_path: Path) -> dict[str, Path]:
    """The synthetic installation, made once per test function (Hypothesis reuses tmp_path)."""
    if not (tmp_path / "ws").exists():
        t = _venv(tmp_path)
        (t["ws"] / "to-site").symlink_to(t["site"])
        (t["ws"] / "to-pkg").symlink_to(t["src"])
    return {
        "base": tmp_path / "base",
        "venv": tmp_path / "venv",
        "site": tmp_path / "venv" / "lib" / "python3.11" / "site-packages",
        "src": tmp_path / "checkout" / "zeroclaw",
        "extra": tmp_path / "pythonpath",
        "user": tmp_path / "home" / ".local" / "lib" / "python3.11" / "site-packages",
        "ws": tmp_path / "ws",
        "python": tmp_path / "venv" / "bin" / "python",
        "script": tmp_path / "home" / ".local" / "bin" / "zeroclaw",
    }


def test_a_directory_holding_code_cannot_be_moved_or_removed(tmp_path: Path) -> None:
    """`mv <checkout> elsewhere` (or `rm -r` of the venv's parent) and a tree of the
    agent's own in its place: a write naming an ancestor of a code path is refused too,
    even under `sandbox = "none"`, where only the policy stands. A new file beside the
    code, in that same directory, stays allowed to `full`."""
    t = _venv(tmp_path)
    code = code_roots(code_paths(_facts(t)))
    rules = rules_for(str(t["ws"]), workspace_only=False, may_write=True, code=code)
    for holder in (tmp_path, t["src"].parent, t["user"].parent, tmp_path / "home"):
        decision = check_path(rules, str(holder), "write")
        assert decision.code == "forbidden_path", holder
        assert "holds the daemon's own code" in decision.reason
    assert check_path(rules, str(tmp_path / "beside.txt"), "write").allowed
    decision = decide_command(
        "mv ../checkout ../moved",
        allowed_commands=frozenset({"mv"}),
        may_run_shell=True,
        block_high_risk=True,
        check_path=lambda p, a: check_path(rules, p, a),
    )
    assert (decision.allowed, decision.code) == (False, "forbidden_path")


def test_a_module_linked_into_the_code_from_outside_it_is_code(tmp_path: Path) -> None:
    """Debian's stdlib `sitecustomize.py` is a symlink to /etc/python3.X/: every root held,
    but the file every Python of that installation runs at start lay outside them all, so
    `full` could rewrite it (the policy judges the real path; so does Landlock). Found by
    the attack pass. Reproduced with a sys.path entry holding such a link."""
    lib = tmp_path / "lib"
    lib.mkdir()
    outside = tmp_path / "etc-python"
    outside.mkdir()
    (outside / "sitecustomize.py").write_text("")
    (lib / "sitecustomize.py").symlink_to(outside / "sitecustomize.py")
    ws = tmp_path / "ws"
    ws.mkdir()
    gather = (
        "import json, sitecustomize; from zeroclaw.policy import code_roots, daemon_code_paths;"
        " print(json.dumps(code_roots(daemon_code_paths())))"
    )
    result = subprocess.run(
        [sys.executable, "-c", gather],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": f"{REPO}:{lib}"},
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    code = tuple(json.loads(result.stdout))
    rules = rules_for(str(ws), workspace_only=False, may_write=True, code=code)
    decision = check_path(rules, str(outside / "sitecustomize.py"), "write")
    assert (decision.allowed, decision.code) == (False, "forbidden_path"), decision
    assert check_path(rules, str(outside / "beside.txt"), "write").allowed  # only the module


_SEGMENTS = st.lists(st.sampled_from(["a", "b", "ab", "a.b", "b-"]), max_size=4)


@settings(max_examples=300, deadline=None)
@given(_SEGMENTS, st.lists(_SEGMENTS, min_size=1, max_size=4))
def test_inside_code_by_strings_agrees_with_paths(path: list[str], roots: list[list[str]]) -> None:
    """The string test the daemon runs for every loaded module (ADR 0067) says what the
    PurePosixPath one said, for the normalised absolute paths it is given."""
    here = "/" + "/".join(path)
    code = ["/" + "/".join(r) for r in roots]
    expected = next(
        (
            str(root)
            for root in map(PurePosixPath, code)
            if PurePosixPath(here) == root or root in PurePosixPath(here).parents
        ),
        None,
    )
    assert inside_code(here, code) == expected


def test_realpath_by_directory_answers_as_realpath(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "pkg").mkdir(parents=True)
    (real / "pkg" / "mod.py").write_text("")
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("")
    (real / "pkg" / "linked.py").symlink_to(elsewhere)  # a file that is a symlink
    (tmp_path / "alias").symlink_to(real)  # a directory that is one
    resolve = realpath_by_directory()
    for path in (
        real / "pkg" / "mod.py",
        real / "pkg" / "linked.py",
        tmp_path / "alias" / "pkg" / "mod.py",
        tmp_path / "alias" / "pkg" / "linked.py",
        tmp_path / "alias" / "pkg" / "missing.py",
        tmp_path / "alias" / "pkg",
    ):
        assert resolve(str(path)) == os.path.realpath(path), path
