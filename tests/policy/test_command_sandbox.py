"""The ruleset planned for one shell command (pure: a fake filesystem in, rules out)."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw.policy._landlock import (
    EXECUTE,
    NOT_CONFINED,
    NOT_EXECUTABLE,
    READ,
    READ_FILE,
    RUN,
    WRITE_FILE,
    EntryKind,
    carve,
    command_executables,
    elf_interpreter,
    loader_of,
    plan_command_sandbox,
    sandbox_summary,
)

# A small system: /etc with a secret, a nested forbidden dir and a symlink; merged /usr.
FS: dict[str, list[tuple[str, EntryKind]]] = {
    "/etc": [("shadow", "file"), ("hostname", "file"), ("ssl", "dir"), ("mtab", "symlink")],
    "/etc/ssl": [("private", "dir"), ("certs", "dir"), ("openssl.cnf", "file")],
    "/usr": [("bin", "dir"), ("lib", "dir")],
    "/usr/bin": [("tar", "file"), ("git", "file"), ("sh", "file")],
}
LINKS = {"/bin": "/usr/bin", "/lib": "/usr/lib", "/lib64": "/usr/lib64"}


def listdir(path: str) -> list[tuple[str, EntryKind]]:
    return FS.get(path, [])


def resolve(path: str) -> str:
    for link, target in LINKS.items():
        if path == link or path.startswith(link + "/"):
            return target + path[len(link) :]
    return path


def plan(excluded: list[str], **kw: object) -> dict[str, int]:
    args: dict[str, object] = {
        "workspace": "/ws/alpha",
        "home": "/run/zc/homes/alpha/cmd-1",
        "executables": ["/bin/tar", "/lib64/ld-linux-x86-64.so.2"],
        "excluded": excluded,
        "system": ("/usr", "/lib", "/lib64", "/bin", "/etc"),
        "devices": ("/dev/null",),
        "secrets": (),
        "resolve": resolve,
        "listdir": listdir,
        **kw,
    }
    rules = plan_command_sandbox(**args).rules  # type: ignore[arg-type]
    merged: dict[str, int] = {}
    for path, rights in rules:
        merged[path] = merged.get(path, 0) | rights
    return merged


def test_nothing_but_the_allowed_binaries_and_loader_is_executable() -> None:
    rules = plan([])
    executable = {p for p, r in rules.items() if r & EXECUTE}
    assert executable == {"/usr/bin/tar", "/usr/lib64/ld-linux-x86-64.so.2"}
    assert rules["/usr/bin/tar"] & RUN == RUN
    assert rules["/ws/alpha"] == NOT_EXECUTABLE  # the agent writes there: never executable
    assert rules["/run/zc/homes/alpha/cmd-1"] == NOT_EXECUTABLE
    assert rules["/usr"] == READ and rules["/etc"] == READ  # /bin is /usr/bin: one rule
    assert rules["/dev/null"] == READ_FILE | WRITE_FILE
    assert "/bin" not in rules and "/usr/lib" in rules


def test_writes_only_in_the_workspace_write_grants_and_home() -> None:
    rules = plan([], grants=[("/ws/beta", "read"), ("/ws/gamma", "write")])
    writable = {p for p, r in rules.items() if r & WRITE_FILE and p != "/dev/null"}
    assert writable == {"/ws/alpha", "/ws/gamma", "/run/zc/homes/alpha/cmd-1"}
    assert rules["/ws/beta"] == READ


def test_a_forbidden_file_is_carved_out_entry_by_entry() -> None:
    rules = plan(["/etc/shadow", "/etc/ssl/private"])
    assert "/etc" not in rules
    etc = {p for p in rules if p.startswith("/etc")}
    # every entry but the forbidden ones; the symlink gets no rule (it would grant /proc/...)
    assert etc == {"/etc/hostname", "/etc/ssl/certs", "/etc/ssl/openssl.cnf"}


def test_a_forbidden_directory_is_absent_altogether() -> None:
    rules = plan(["/etc"])
    assert not any(p.startswith("/etc") for p in rules)


def test_a_forbidden_binary_is_not_executable_even_when_allowed() -> None:
    rules = plan(["/usr/bin/tar"])
    assert "/usr/bin/tar" not in rules
    assert {p for p in rules if p.startswith("/usr/bin")} == {"/usr/bin/git", "/usr/bin/sh"}
    assert not rules["/usr/bin/sh"] & EXECUTE


def test_other_workspaces_below_a_granted_path_are_carved_out() -> None:
    FS["/ws"] = [("alpha", "dir"), ("beta", "dir"), ("gamma", "dir")]
    try:
        rules = carve("/ws", READ, [PurePosixPath("/ws/gamma")], listdir)
    finally:
        del FS["/ws"]
    assert rules == [("/ws/alpha", READ), ("/ws/beta", READ)]


# A random tree and random exclusions: nothing excluded is granted, and everything else
# (symlinks aside: they get no rule) is covered.
NAMES = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def trees(draw: st.DrawFn) -> dict[str, list[tuple[str, EntryKind]]]:
    fs: dict[str, list[tuple[str, EntryKind]]] = {}

    def build(path: str, depth: int) -> None:
        names = draw(st.sets(NAMES, max_size=3))
        entries: list[tuple[str, EntryKind]] = []
        for name in sorted(names):
            kind: EntryKind = draw(
                st.sampled_from(["dir", "file", "symlink"] if depth else ["file"])
            )
            entries.append((name, kind))
            if kind == "dir":
                build(f"{path}/{name}", depth - 1)
        fs[path] = entries

    build("/r", 3)
    return fs


def _files(fs: dict[str, list[tuple[str, EntryKind]]], path: str) -> list[tuple[str, bool]]:
    out = []
    for name, kind in fs.get(path, []):
        child = f"{path}/{name}"
        out.append((child, kind == "symlink"))
        if kind == "dir":
            out.extend(_files(fs, child))
    return out


@settings(max_examples=50, deadline=None)
@given(fs=trees(), data=st.data())
def test_carving_grants_everything_but_the_excluded(
    fs: dict[str, list[tuple[str, EntryKind]]], data: st.DataObject
) -> None:
    everything = [p for p, _ in _files(fs, "/r")]
    excluded = data.draw(st.lists(st.sampled_from(everything), max_size=3)) if everything else []
    out = [PurePosixPath(e) for e in excluded]
    rules = carve("/r", READ, out, lambda p: fs.get(p, []))
    granted = [PurePosixPath(p) for p, _ in rules]

    def covered(path: PurePosixPath) -> bool:
        return any(path == g or g in path.parents for g in granted)

    for path, is_link in _files(fs, "/r"):
        p = PurePosixPath(path)
        banned = any(p == e or e in p.parents for e in out)
        if banned:
            assert not covered(p), (path, rules)
        elif not is_link and not any(p in e.parents for e in out):
            # neither excluded nor above an exclusion (such a directory is granted entry
            # by entry, not itself): covered
            assert covered(p), (path, rules)


def test_elf_interpreter_of_real_binaries() -> None:
    ls = shutil.which("ls")
    assert ls is not None
    loader = loader_of(ls)
    assert loader is not None and "ld" in loader
    which = shutil.which("which")
    if which is not None:
        with open(which, "rb") as fh:
            script = fh.read(2) == b"#!"
        if script:
            assert loader_of(which) is None  # a script: its interpreter is not granted


def test_elf_interpreter_parses_32_bit_big_endian() -> None:
    interp = b"/lib/ld.so.1\0"
    phoff, phentsize = 52, 32
    header = bytearray(52)
    header[:6] = b"\x7fELF\x01\x02"  # ELFCLASS32, big-endian
    struct.pack_into(">I", header, 28, phoff)
    struct.pack_into(">HH", header, 42, phentsize, 2)
    load = struct.pack(">IIIIIIII", 1, 0, 0, 0, 0, 0, 5, 0)
    pt_interp = struct.pack(">IIIIIIII", 3, 116, 0, 0, len(interp), len(interp), 4, 1)
    image = bytes(header) + load + pt_interp + interp

    def read_at(offset: int, size: int) -> bytes:
        return image[offset : offset + size]

    assert elf_interpreter(image[:64], read_at) == "/lib/ld.so.1"
    assert elf_interpreter(b"#!/bin/sh\n" + bytes(60), read_at) is None
    assert elf_interpreter(b"", read_at) is None


def test_command_executables_resolve_names_and_add_the_loader() -> None:
    found = command_executables(["ls", "no-such-program-zc"], "/usr/bin:/bin")
    ls = shutil.which("ls", path="/usr/bin:/bin")
    assert ls is not None
    assert found == (os.path.realpath(ls), os.path.realpath(loader_of(ls) or ""))


@pytest.mark.parametrize(
    ("mode", "abi", "summary"),
    [
        ("auto", 7, "landlock ABI 7"),
        ("landlock", 6, "landlock ABI 6"),
        ("auto", 5, "landlock ABI 5 (without signal scope, abstract-socket scope)"),
        (
            "landlock",
            3,
            "landlock ABI 3 (without signal scope, abstract-socket scope, TCP rules)",
        ),
        ("none", 7, NOT_CONFINED),
        ("auto", 0, NOT_CONFINED),
        ("landlock", 0, 'unavailable: sandbox = "landlock" but this kernel has no Landlock'),
    ],
)
def test_sandbox_summary(mode: str, abi: int, summary: str) -> None:
    assert sandbox_summary(mode, abi) == summary
    assert NOT_CONFINED == "none: commands parsed, not confined"
