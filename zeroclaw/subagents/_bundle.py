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
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec
import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

ID_SYNTAX = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
RESERVED_IDS = frozenset({"main", "daemon", "cli"})
MAX_FILE_BYTES = 256 * 1024
MAX_BUNDLE_BYTES = 2 * 1024 * 1024
MANIFEST = "agent.yaml"

Effects = Literal["none", "read_only", "writes_workspace", "writes_external"]


class Policy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    allowedCallers: tuple[str, ...] = ()  # default deny
    maxConcurrency: int = 1
    timeoutSeconds: float = 120.0
    maxToolCalls: int = 8


class McpBinding(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    server: str
    tools: tuple[str, ...] = ()


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
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
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
        path = self.locate(ref)
        try:
            size = path.stat().st_size
            if not path.is_file():
                raise _Refused(f"{ref!r}: not a regular file")
            if size > MAX_FILE_BYTES:
                raise _Refused(f"{ref!r}: {size} bytes; at most {MAX_FILE_BYTES} per file")
            self.total += size
            if self.total > MAX_BUNDLE_BYTES:
                raise _Refused(f"the bundle is over {MAX_BUNDLE_BYTES} bytes")
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise _Refused(f"{ref!r}: no such file in the bundle") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise _Refused(f"{ref!r}: {exc}") from None


def front_matter(text: str) -> dict[str, Any] | None:
    """The YAML mapping between the leading `---` lines of a SKILL.md, or None."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    try:
        end = next(i for i, line in enumerate(lines[1:], 1) if line.strip() == "---")
    except StopIteration:
        return None
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _schema(reader: _Reader, ref: str, what: str) -> dict[str, Any]:
    try:
        schema = json.loads(reader.read(ref))
    except json.JSONDecodeError as exc:
        raise _Refused(f"{what} {ref!r}: not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise _Refused(f"{what} {ref!r}: a schema is a JSON object")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise _Refused(f"{what} {ref!r}: not a valid JSON Schema 2020-12: {exc.message}") from None
    return schema


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


def load_bundle(
    path: Path, *, providers: frozenset[str], reserved: frozenset[str] = frozenset()
) -> Bundle | BundleProblems:
    """Read and judge one bundle directory. `providers`: the config's `kind.alias` names;
    `reserved`: ids no bundle may take (the configured agent aliases)."""
    reader = _Reader(path)
    try:
        raw = yaml.safe_load(reader.read(MANIFEST))
    except _Refused as exc:
        return BundleProblems(path, [str(exc)])
    except yaml.YAMLError as exc:
        return BundleProblems(path, [f"{MANIFEST}: not YAML: {exc}"])
    try:
        manifest = msgspec.convert(raw, Manifest)
    except msgspec.ValidationError as exc:
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
    system = ""
    skills: dict[str, str] = {}
    schemas: dict[str, dict[str, Any] | None] = {"input": None, "output": None}
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
        if front_matter(text) is None:
            problems.append(f"skill {ref!r}: SKILL.md needs YAML front matter between '---' lines")
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
    directory: Path, *, providers: frozenset[str], reserved: frozenset[str] = frozenset()
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
        result = load_bundle(entry, providers=providers, reserved=reserved)
        if isinstance(result, Bundle):
            loaded.append(result)
        else:
            refused.append(result)
    return loaded, refused
