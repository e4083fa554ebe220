"""The daemon's own code: where the Python that runs the daemon (and the operator's next CLI
command) is read from. Read-only to every agent under every profile, `full` included
(ADR 0044): a `.pth` file planted in site-packages, or a module planted in the package's
directory or on `sys.path`, would run as the operator, unsandboxed, at the next start.

`code_paths` is pure (the interpreter's facts and the filesystem lookups are passed in);
`interpreter_facts` is the thin shell that reads them from the running interpreter.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import site
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal, get_args

# What makes a path the daemon's code. A new kind needs conformance cells (test_completeness).
CodePathKind = Literal[
    "interpreter",  # sys.executable, resolved (a venv's python is a symlink to the base one)
    "script",  # the `zeroclaw` console script: argv[0], beside the interpreter, on PATH
    "base_prefix",  # sys.base_prefix: the base installation's standard library
    "prefix",  # sys.prefix and sys.exec_prefix: the venv, its bin/ and its scripts
    "site_packages",  # every site.getsitepackages() entry: where a .pth file runs
    "user_site",  # site.getusersitepackages(): the operator's other Pythons read it
    "package",  # zeroclaw.__file__'s directory (an editable install: the source checkout)
    "sys_path",  # every sys.path entry (the cwd of `python -m`, PYTHONPATH)
    "editable_source",  # what a setuptools editable finder maps a package name to
]
CODE_PATH_KINDS: tuple[CodePathKind, ...] = get_args(CodePathKind)


@dataclass(frozen=True, slots=True)
class CodePath:
    kind: CodePathKind
    path: str  # absolute, resolved (it may not exist yet)


@dataclass(frozen=True, slots=True)
class InterpreterFacts:
    """What the running interpreter says about where its code comes from."""

    executable: str
    base_prefix: str
    prefix: str
    exec_prefix: str
    site_packages: tuple[str, ...]
    user_site: str | None
    package_dir: str
    sys_path: tuple[str, ...]
    cwd: str  # what a relative (or empty) sys.path entry means
    editable_sources: tuple[str, ...] = ()
    # The console scripts the operator's next command may run (`pip install --user` puts
    # one in ~/.local/bin, outside every prefix). Existing files only.
    scripts: tuple[str, ...] = ()
    # Where the loaded modules came from (each module's file, each package's directory),
    # as named before resolution: a symlink in a code tree (Debian's stdlib
    # `sitecustomize.py` links to /etc/python3.X/) leads to code outside every root.
    module_files: tuple[str, ...] = ()


def code_paths(
    facts: InterpreterFacts, resolve: Callable[[str], str] = os.path.realpath
) -> tuple[CodePath, ...]:
    """Every (kind, real path) of the daemon's code, in kind order, each pair once. A path
    of two kinds is listed under both (the conformance cells want one path per kind);
    `code_roots` gives the set to enforce.

    Paths that do not exist (yet) are kept: a missing user site, site-packages directory
    or sys.path entry made by an agent would be read at the next start (the policy refuses
    a write under it; Landlock, which can only name what exists, splits its nearest
    existing ancestor, where nothing new can then be made)."""
    candidates: list[tuple[CodePathKind, str]] = [
        ("interpreter", facts.executable),
        *(("script", p) for p in facts.scripts),
        ("base_prefix", facts.base_prefix),
        ("prefix", facts.prefix),
        ("prefix", facts.exec_prefix),
        *(("site_packages", p) for p in facts.site_packages),
        *((("user_site", facts.user_site),) if facts.user_site else ()),
        ("package", facts.package_dir),
        # '' (the script's directory or the cwd) and relative entries mean the cwd
        *(("sys_path", os.path.join(facts.cwd, p)) for p in facts.sys_path),
        *(("editable_source", p) for p in facts.editable_sources),
    ]
    out: dict[tuple[CodePathKind, str], None] = {}
    for kind, path in candidates:
        if not path or "\x00" in path:
            continue
        out[(kind, resolve(os.path.join(facts.cwd, path)))] = None
    # A loaded module reached through a sys.path entry whose real file lies outside every
    # root above is code too (kept under `sys_path`); those inside add nothing.
    roots = code_roots(path for _, path in out)
    resolve_file = realpath_by_directory() if resolve is os.path.realpath else resolve
    for path in facts.module_files:
        if not path or "\x00" in path or not os.path.isabs(path):
            continue
        real = resolve_file(path)
        if inside_code(real, roots) is None:
            out[("sys_path", real)] = None
    return tuple(CodePath(kind, path) for kind, path in out)


def realpath_by_directory() -> Callable[[str], str]:
    """os.path.realpath for many files in few directories (every loaded module's): each
    directory resolved once, then only whether the file itself is a symlink (then it is
    resolved whole). The same answers, a fraction of the system calls (ADR 0067)."""
    directories: dict[str, str] = {}

    def resolve(path: str) -> str:
        head, tail = os.path.split(path)
        if tail in ("", ".", "..") or os.path.islink(path):
            return os.path.realpath(path)
        real = directories.get(head)
        if real is None:
            real = directories[head] = os.path.realpath(head)
        return os.path.join(real, tail)

    return resolve


def code_roots(paths: Iterable[CodePath | str]) -> tuple[str, ...]:
    """The fewest paths covering all of `paths` (one beneath another is dropped), sorted."""
    real = sorted({p.path if isinstance(p, CodePath) else p for p in paths})
    kept: list[PurePosixPath] = []
    for path in map(PurePosixPath, real):
        if not any(path == k or k in path.parents for k in kept):
            kept.append(path)
    return tuple(map(str, kept))


def inside_code(path: str, code: Sequence[str]) -> str | None:
    """The code path `path` (absolute, resolved) lies in or is, or None. By strings, once
    normalised: called for every loaded module at each daemon start (ADR 0067)."""
    here = posixpath.normpath(path)
    for root in map(posixpath.normpath, code):
        if here == root or here.startswith(root if root.endswith("/") else f"{root}/"):
            return root
    return None


def editable_sources(meta_path: Iterable[object], modules: dict[str, object]) -> tuple[str, ...]:
    """What setuptools' editable finders (`__editable___<dist>_finder`, a meta-path finder
    installed by a .pth in site-packages) map package names to: the source checkout of an
    editable install is reached through these, not through a sys.path entry."""
    found: list[str] = []
    for finder in meta_path:
        module = modules.get(getattr(finder, "__module__", "") or "")
        if not getattr(module, "__name__", "").startswith("__editable__"):
            continue
        mapping = getattr(module, "MAPPING", None)
        if isinstance(mapping, dict):
            found.extend(str(v) for v in mapping.values() if isinstance(v, str))
        namespaces = getattr(module, "NAMESPACES", None)
        if isinstance(namespaces, dict):
            for paths in namespaces.values():
                if isinstance(paths, list):
                    found.extend(str(v) for v in paths if isinstance(v, str))
    return tuple(dict.fromkeys(found))


def interpreter_facts() -> InterpreterFacts:
    """The running interpreter's facts (thin shell: reads sys, site and the package)."""
    import zeroclaw

    try:
        site_packages = tuple(site.getsitepackages())
    except AttributeError:  # an old virtualenv's site module has none
        site_packages = ()
    try:
        user_site: str | None = site.getusersitepackages()
    except (AttributeError, KeyError):  # no home directory to name one
        user_site = None
    scripts = (
        sys.argv[0] if sys.argv and os.path.basename(sys.argv[0]) == "zeroclaw" else "",
        os.path.join(os.path.dirname(sys.executable), "zeroclaw"),
        shutil.which("zeroclaw") or "",
    )
    return InterpreterFacts(
        executable=sys.executable,
        base_prefix=sys.base_prefix,
        prefix=sys.prefix,
        exec_prefix=sys.exec_prefix,
        site_packages=site_packages,
        user_site=user_site,
        package_dir=os.path.dirname(os.path.abspath(zeroclaw.__file__)),
        sys_path=tuple(sys.path),
        cwd=os.getcwd(),
        editable_sources=editable_sources(sys.meta_path, dict(sys.modules)),
        scripts=tuple(dict.fromkeys(p for p in scripts if p and os.path.isfile(p))),
        module_files=loaded_module_files(dict(sys.modules)),
    )


def loaded_module_files(modules: dict[str, object]) -> tuple[str, ...]:
    """Each loaded module's file and each package's directories, as the modules name them."""
    found: list[str] = []
    for module in modules.values():
        file = getattr(module, "__file__", None)
        if isinstance(file, str):
            found.append(file)
        package = getattr(module, "__path__", None)
        if isinstance(package, list):
            found.extend(p for p in package if isinstance(p, str))
    return tuple(dict.fromkeys(found))


def daemon_code_paths() -> tuple[CodePath, ...]:
    """This process's code paths: gathered once at daemon start (and by the in-process
    chat), then handed to every agent in its spec."""
    return code_paths(interpreter_facts())
