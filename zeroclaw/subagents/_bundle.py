"""A sub-agent bundle on disk, read and judged: `subagents/<id>/` (ADR 0023).

The directory is the editing format; what runs is a revision identified by its digest.
Loading never trusts the bundle: every path it names must stay inside it (no `..`, no
absolute path, no symlink leading out), every file and the whole bundle have a size cap,
skills carry YAML front matter, schemas compile as JSON Schema 2020-12, and the model
provider must exist in the config. Problems are collected, not raised: one bad bundle is
reported and the others load.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import hashlib
import json
import os
import re
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import msgspec

from .._yaml import YamlError, front_matter_text, safe_load
from ..turns import McpBinding, Policy
from ._schema import meta_schema_problem, pattern_problems

ID_SYNTAX = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
RESERVED_IDS = frozenset({"main", "daemon", "cli"})
MAX_FILE_BYTES = 256 * 1024
MAX_BUNDLE_BYTES = 2 * 1024 * 1024
MAX_SCHEMA_DEPTH = 64  # JSON nesting; deeper would exhaust the stack when validating
MANIFEST = "agent.yaml"
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_DIR = _OPEN_FILE | os.O_DIRECTORY
_INDEX = re.compile(r"^[0-9]+$")

Effects = Literal["none", "read_only", "writes_workspace", "writes_external"]


class Manifest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`agent.yaml`, with the field names the seed uses."""

    id: str
    description: str
    model_provider: str
    systemPrompt: str = "./SYSTEM.md"
    mode: Literal["dispatch_only"] = "dispatch_only"
    skills: tuple[str, ...] = ()
    inputSchema: str | None = None
    outputSchema: str | None = None
    policy: Policy = Policy()
    effects: Effects = "none"
    retry_on_restart: bool = False
    mcp: tuple[McpBinding, ...] = ()


@dataclass(frozen=True)
class Bundle:
    """A bundle that passed every check, with what its revision is made of."""

    manifest: Manifest
    system_prompt: str
    skills: dict[str, str]  # skill name -> SKILL.md text
    input_schema: dict[str, object] | None
    output_schema: dict[str, object] | None
    digest: str = field(default="")


@dataclass
class BundleProblems:
    """Why the bundle in `path` was not loaded (or skipped: a reserved id)."""

    path: Path
    problems: list[str]


class _Refused(Exception):
    pass


class _Reader:
    """Reads files of one bundle, each locked inside it and counted against its caps."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.real_root = Path(os.path.realpath(root))
        self.total = 0

    def locate(self, ref: str) -> Path:
        if not ref or "\x00" in ref:
            raise _Refused(f"{ref!r}: not a path")
        rel = Path(ref)
        if rel.is_absolute():
            raise _Refused(f"{ref!r}: an absolute path; paths are relative to the bundle")
        if ".." in rel.parts:
            raise _Refused(f"{ref!r}: '..' leads out of the bundle")
        real = Path(os.path.realpath(self.root / rel))
        if real != self.real_root and self.real_root not in real.parents:
            raise _Refused(f"{ref!r}: a symlink leads out of the bundle")
        return real

    def read(self, ref: str) -> str:
        real = self.locate(ref)
        data = read_regular(self.real_root, real.relative_to(self.real_root), ref)
        self.total += len(data)
        if self.total > MAX_BUNDLE_BYTES:
            raise _Refused(f"the bundle is over {MAX_BUNDLE_BYTES} bytes")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Refused(f"{ref!r}: not UTF-8: {exc}") from None


def read_regular(root: Path, rel: Path, ref: str, cap: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file `rel` under `root`, opened once, component by
    component, never following a symlink nor blocking: what is checked (the fstat of the
    opened descriptor) is what is read, whatever is renamed into the path meanwhile."""
    fds: list[int] = []
    try:
        try:
            fds.append(os.open(root, _OPEN_DIR))
            for part in rel.parts[:-1]:
                fds.append(os.open(part, _OPEN_DIR, dir_fd=fds[-1]))
            if not rel.parts:
                raise _Refused(f"{ref!r}: not a regular file")
            fds.append(os.open(rel.parts[-1], _OPEN_FILE, dir_fd=fds[-1]))
        except FileNotFoundError:
            raise _Refused(f"{ref!r}: no such file in the bundle") from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                # realpath() saw no escaping symlink; one was swapped in since.
                raise _Refused(f"{ref!r}: a symlink appeared while the bundle was read") from None
            raise _Refused(f"{ref!r}: {exc.strerror}") from None
        info = os.fstat(fds[-1])
        if not stat.S_ISREG(info.st_mode):
            raise _Refused(f"{ref!r}: not a regular file")
        if info.st_nlink > 1:
            raise _Refused(
                f"{ref!r}: a file with {info.st_nlink} hard links; a hard link may lead "
                "out of the bundle"
            )
        chunks: list[bytes] = []
        size = 0
        while size <= cap:
            try:
                chunk = os.read(fds[-1], cap + 1 - size)
            except OSError as exc:
                raise _Refused(f"{ref!r}: {exc.strerror}") from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > cap:
            raise _Refused(f"{ref!r}: over {cap} bytes; at most {cap} per file")
        return b"".join(chunks)
    finally:
        for fd in fds:
            os.close(fd)


def front_matter(text: str) -> dict[str, Any] | None:
    """The YAML mapping between the leading `---` lines of a SKILL.md, or None."""
    data = _front_matter(text)
    return data if isinstance(data, dict) else None


def _front_matter(text: str) -> dict[str, Any] | str:
    """The front matter mapping, or why there is none."""
    missing = "SKILL.md needs YAML front matter between '---' lines"
    block = front_matter_text(text)
    if block is None:
        return missing
    try:
        data = safe_load(block)
    except YamlError:
        return missing
    except RecursionError:
        return "SKILL.md front matter is nested too deeply"
    return data if isinstance(data, dict) else missing


def _depth(document: Any) -> int:
    """How deep lists and objects nest in a parsed JSON document (without recursing)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in node)
    return deepest


def _pointer_target(schema: dict[str, Any], ref: str) -> str | None:
    """Why `ref` does not resolve inside `schema`, or None when it does. Only the forms
    every resolver reads the same are allowed: "#" and "#/json/pointer" (RFC 6901, in a
    URI fragment: percent-decoded first, then ~1 and ~0), landing on a schema."""
    if not ref.startswith("#"):
        return "not a local reference (only '#...' inside the same schema)"
    fragment = unquote(ref[1:])
    if fragment == "":
        return None
    if not fragment.startswith("/"):
        return "an anchor reference; only JSON pointers ('#/...') are allowed"
    node: Any = schema
    for token in fragment[1:].split("/"):
        if isinstance(node, dict):
            key = token.replace("~1", "/").replace("~0", "~")
            if key not in node:
                return "resolves to nothing in the schema"
            node = node[key]
        elif isinstance(node, list):
            if not _INDEX.match(token) or int(token) >= len(node):
                return "resolves to nothing in the schema"
            node = node[int(token)]
        else:
            return "resolves to nothing in the schema"
    if not isinstance(node, dict | bool):
        return "does not point at a schema"
    return None


def ref_problems(schema: dict[str, Any]) -> list[str]:
    """Every reference in `schema` that could lead out of it or not resolve: a "$ref"
    anywhere (a pointer can make any part of the document a schema, so no part is
    skipped) must be a local pointer that resolves; "$dynamicRef" and "$recursiveRef" are
    refused; an "$id" may only be a fragment, so no base URI changes where refs lead."""
    problems: list[str] = []
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        stack.extend(node.values())
        for key in ("$dynamicRef", "$recursiveRef"):
            if key in node:
                problems.append(f"{key} {node[key]!r}: not allowed; use a local '$ref'")
        if "$ref" in node:
            ref = node["$ref"]
            why = (
                _pointer_target(schema, ref) if isinstance(ref, str) else "a $ref must be a string"
            )
            if why is not None:
                problems.append(f"$ref {ref!r}: {why}")
        if "$id" in node:
            uri = node["$id"]
            if not isinstance(uri, str) or not uri.startswith("#"):
                problems.append(f"$id {uri!r}: only a fragment ('#...') is allowed")
    return problems


def _schema(reader: _Reader, ref: str, what: str) -> dict[str, Any]:
    try:
        schema = json.loads(reader.read(ref))
    except json.JSONDecodeError as exc:
        raise _Refused(f"{what} {ref!r}: not JSON: {exc}") from None
    except RecursionError:
        raise _Refused(f"{what} {ref!r}: nested too deeply") from None
    if not isinstance(schema, dict):
        raise _Refused(f"{what} {ref!r}: a schema is a JSON object")
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise _Refused(f"{what} {ref!r}: nested more than {MAX_SCHEMA_DEPTH} levels deep")
    problems = schema_problems(json.dumps(schema, sort_keys=True, separators=(",", ":")))
    if problems:
        raise _Refused(f"{what} {ref!r}: " + "; ".join(problems))
    return schema


@functools.lru_cache(maxsize=1024)
def schema_problems(canonical: str) -> tuple[str, ...]:
    """What is wrong with a schema (given as canonical JSON), remembered: checking against
    the 2020-12 meta-schema costs about a millisecond, and every rescan (each reload, each
    discovery scan) sees the same unchanged schemas again."""
    schema = json.loads(canonical)
    problem = meta_schema_problem(schema)
    if problem is not None:
        return (f"not a valid JSON Schema 2020-12: {problem}",)
    return tuple(ref_problems(schema) + pattern_problems(schema))


def digest_of(bundle: Bundle) -> str:
    """SHA-256 over a canonical form of everything the revision runs with: key order in
    the YAML or the schemas does not change it, any content change does."""
    canonical = {
        "manifest": msgspec.to_builtins(bundle.manifest),
        "system": bundle.system_prompt,
        "skills": bundle.skills,
        "input_schema": bundle.input_schema,
        "output_schema": bundle.output_schema,
    }
    encoded = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(encoded.encode()).hexdigest()


McpAllowlists = Mapping[str, Collection[str]]  # [mcp_servers] name -> its `tools` allowlist


def mcp_binding_problems(bindings: Collection[McpBinding], servers: McpAllowlists) -> list[str]:
    """Why a bundle's `mcp` bindings cannot be honoured (issue 26): a server that is not
    in `[mcp_servers]`, one bound twice, a tool outside the server's `tools` allowlist.
    Pure."""
    problems: list[str] = []
    seen: set[str] = set()
    for binding in bindings:
        if binding.server in seen:
            problems.append(f"mcp: server {binding.server!r} is bound twice")
            continue
        seen.add(binding.server)
        allowed = servers.get(binding.server)
        if allowed is None:
            known = ", ".join(sorted(servers)) or "none"
            problems.append(f"mcp: server {binding.server!r} is not in [mcp_servers] ({known})")
            continue
        outside = [t for t in binding.tools if t not in allowed]
        if outside:
            problems.append(
                f"mcp: {binding.server}: {', '.join(repr(t) for t in outside)} not in "
                f"[mcp_servers.{binding.server}] tools"
            )
    return problems


def load_bundle(
    path: Path,
    *,
    providers: frozenset[str],
    reserved: frozenset[str] = frozenset(),
    mcp_servers: McpAllowlists | None = None,
) -> Bundle | BundleProblems:
    """Read and judge one bundle directory. `providers`: the config's `kind.alias` names;
    `reserved`: ids no bundle may take (the configured agent aliases); `mcp_servers`: the
    config's servers and their allowlists, which the bundle's `mcp` bindings must stay in
    (None: not checked)."""
    try:
        return _load(path, providers, reserved, mcp_servers)
    except RecursionError:
        # Each parser's own catch names the file; this one keeps any other deep structure
        # from stopping the scan of the other bundles.
        return BundleProblems(path, ["a file of the bundle is nested too deeply"])


def _load(
    path: Path,
    providers: frozenset[str],
    reserved: frozenset[str],
    mcp_servers: McpAllowlists | None,
) -> Bundle | BundleProblems:
    reader = _Reader(path)
    try:
        raw = safe_load(reader.read(MANIFEST))
    except _Refused as exc:
        return BundleProblems(path, [str(exc)])
    except YamlError as exc:
        return BundleProblems(path, [f"{MANIFEST}: not YAML: {exc}"])
    except RecursionError:
        return BundleProblems(path, [f"{MANIFEST}: nested too deeply"])
    try:
        manifest = msgspec.convert(raw, Manifest)
    except (msgspec.ValidationError, RecursionError) as exc:
        return BundleProblems(path, [f"{MANIFEST}: {exc}"])
    problems: list[str] = []
    if not ID_SYNTAX.match(manifest.id):
        problems.append(f"id {manifest.id!r}: lowercase letters, digits, '-' and '_'")
    if manifest.id != path.name:
        problems.append(f"id {manifest.id!r} differs from its directory name {path.name!r}")
    if manifest.id in RESERVED_IDS | reserved:
        problems.append(f"id {manifest.id!r} is reserved (an agent alias, main, daemon or cli)")
    if manifest.model_provider not in providers:
        known = ", ".join(sorted(providers)) or "none"
        problems.append(f"model_provider {manifest.model_provider!r} is not configured ({known})")
    policy = manifest.policy
    if policy.maxConcurrency < 1 or policy.maxToolCalls < 0 or not policy.timeoutSeconds > 0:
        problems.append("policy: maxConcurrency >= 1, maxToolCalls >= 0, timeoutSeconds > 0")
    if mcp_servers is not None:
        problems.extend(mcp_binding_problems(manifest.mcp, mcp_servers))
    system = ""
    skills: dict[str, str] = {}
    schemas: dict[str, dict[str, object] | None] = {"input": None, "output": None}
    try:
        system = reader.read(manifest.systemPrompt)
    except _Refused as exc:
        problems.append(f"systemPrompt {exc}")
    for ref in manifest.skills:
        name = Path(ref).name
        if not ID_SYNTAX.match(name) or name in skills:
            problems.append(f"skill {ref!r}: a skill directory needs its own plain name")
            continue
        try:
            text = reader.read(str(Path(ref) / "SKILL.md"))
        except _Refused as exc:
            problems.append(f"skill {exc}")
            continue
        matter = _front_matter(text)
        if isinstance(matter, str):
            problems.append(f"skill {ref!r}: {matter}")
        skills[name] = text
    for what, schema_ref in (("input", manifest.inputSchema), ("output", manifest.outputSchema)):
        if schema_ref is not None:
            try:
                schemas[what] = _schema(reader, schema_ref, f"{what}Schema")
            except _Refused as exc:
                problems.append(str(exc))
    if problems:
        return BundleProblems(path, problems)
    bundle = Bundle(manifest, system, skills, schemas["input"], schemas["output"])
    return dataclasses.replace(bundle, digest=digest_of(bundle))


def scan_bundles(
    directory: Path,
    *,
    providers: frozenset[str],
    reserved: frozenset[str] = frozenset(),
    mcp_servers: McpAllowlists | None = None,
) -> tuple[list[Bundle], list[BundleProblems]]:
    """Every bundle directory under `directory`, in name order: those that load, and the
    problems of those that do not. A missing directory holds no bundles."""
    loaded: list[Bundle] = []
    refused: list[BundleProblems] = []
    try:
        entries = sorted(p for p in directory.iterdir() if p.is_dir() and not p.is_symlink())
    except FileNotFoundError:
        return loaded, refused
    for entry in entries:
        result = load_bundle(entry, providers=providers, reserved=reserved, mcp_servers=mcp_servers)
        if isinstance(result, Bundle):
            loaded.append(result)
        else:
            refused.append(result)
    return loaded, refused
