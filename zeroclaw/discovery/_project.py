"""The project sources: `adapters/`, `capabilities/` and `mcp/` beside the config file, and
the capability registry zeroclaw ships (the builtin templates).

Each file becomes one item (or, for a capability file, one item per capability); a file
that cannot be used still becomes an item, with diagnostics saying why, so `discover list
--invalid` shows it. Secrets in a manifest are never kept: only environment variable
names, and a warning telling the operator to move the value into the environment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from ._commands import resolve
from ._context import Found, ScanContext
from ._files import Unreadable, display_path, list_files, parse, read_file, schema_diagnostics
from ._model import (
    CapabilityDescriptor,
    Diagnostic,
    DiscoveredItem,
    Health,
    ItemKind,
    Source,
    TrustLevel,
)
from ._redact import contains_secret_keys
from ._schemas import ADAPTER, CAPABILITIES, MCP

MANIFEST_SUFFIXES = (".yaml", ".yml")
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")

# The capability registry every daemon has; capabilities/*.yaml add to it or override it.
BUILTIN_CAPABILITIES: tuple[CapabilityDescriptor, ...] = (
    CapabilityDescriptor(
        "chat.reply", "none", "Answer a message in text", "builtin:text", "builtin:text"
    ),
    CapabilityDescriptor("task.plan", "none", "Plan a task", "builtin:text", "builtin:text"),
    CapabilityDescriptor(
        "repo.analyze", "none", "Read and explain a repository", "builtin:text", "builtin:text"
    ),
    CapabilityDescriptor("code.review", "none", "Review code", "builtin:text", "builtin:text"),
    CapabilityDescriptor(
        "code.generate",
        "writes_workspace",
        "Write code into the workspace",
        "builtin:text",
        "builtin:text",
        audit=("agent", "adapter", "workspace"),
    ),
    CapabilityDescriptor(
        "workflow.code_review", "none", "A code review workflow", "builtin:text", "builtin:text"
    ),
    CapabilityDescriptor(
        "mcp.tool.call",
        "writes_external",
        "Call an allowlisted MCP tool",
        "builtin:json",
        "builtin:json",
        audit=("agent", "server", "tool"),
    ),
    CapabilityDescriptor(
        "mcp.resource.read",
        "read_only_external",
        "Read an MCP resource",
        "builtin:json",
        "builtin:json",
    ),
    CapabilityDescriptor(
        "mcp.prompt.render", "none", "Render an MCP prompt", "builtin:json", "builtin:json"
    ),
)
BUILTIN_SOURCE = Source("builtin_template", "capabilities", display="builtin")


def builtin_capabilities() -> list[DiscoveredItem]:
    return [capability_item(c, BUILTIN_SOURCE) for c in BUILTIN_CAPABILITIES]


def capability_item(
    descriptor: CapabilityDescriptor, source: Source, diagnostics: Iterable[Diagnostic] = ()
) -> DiscoveredItem:
    return DiscoveredItem(
        kind="capability",
        id=descriptor.name,
        source=source,
        trust="project",
        descriptor=descriptor,
        health=Health("available"),
        diagnostics=tuple(diagnostics),
    )


def invalid_item(
    kind: ItemKind, ident: str, source: Source, trust: TrustLevel, notes: Iterable[Diagnostic]
) -> DiscoveredItem:
    """An item whose manifest cannot be used: listed with why (`discover list --invalid`)."""
    return DiscoveredItem(
        kind=kind,
        id=ident,
        source=source,
        trust=trust,
        health=Health("invalid_manifest"),
        diagnostics=tuple(notes),
    )


def _read(ctx: ScanContext, root: Path, path: Path) -> tuple[Any, Source, list[Diagnostic]]:
    """The parsed document (None when unusable), its source, and what went wrong."""
    display = display_path(path, ctx.home, ctx.config_dir)
    source = Source("project_manifest", root.name, str(path), display)
    try:
        data, facts = read_file(path, root, ctx.limits, display)
        document = parse(data, path.suffix, display)
    except Unreadable as exc:
        return None, source, [exc.diagnostic]
    source = Source("project_manifest", root.name, str(facts.path), display)
    notes: list[Diagnostic] = []
    if contains_secret_keys(document):
        notes.append(
            Diagnostic(
                "warning",
                "secret_redacted",
                f"{display} holds a secret-looking key; its value is never shown or kept — "
                "name an environment variable instead (api_key_env, env)",
                source=display,
            )
        )
    return document, source, notes


def _fallback_id(document: Any, path: Path) -> str:
    value = document.get("id") if isinstance(document, dict) else None
    if isinstance(value, str) and _ID.match(value):
        return value
    return path.stem.lower()


def scan_adapters(ctx: ScanContext) -> Found:
    root = ctx.project_dir("adapters")
    files, notes = list_files(root, MANIFEST_SUFFIXES, ctx.limits, "adapters/")
    items = [_adapter(ctx, root, path) for path in files]
    return Found(items, notes)


def _adapter(ctx: ScanContext, root: Path, path: Path) -> DiscoveredItem:
    document, source, notes = _read(ctx, root, path)
    transport = document.get("transport") if isinstance(document, dict) else None
    kind: ItemKind = {"http": "http_adapter", "mcp": "mcp_server"}.get(
        transport if isinstance(transport, str) else "", "cli_adapter"
    )  # type: ignore[assignment]
    if transport == "skill" and isinstance(document, dict):
        declared = document.get("skill_kind")
        kind = (
            declared
            if declared in ("workflow_skill", "runtime_worker", "prompt_role")
            else "workflow_skill"
        )
    ident = _fallback_id(document, path)
    if document is not None:
        notes = [*notes, *schema_diagnostics(document, ADAPTER, source.display)]
    if any(n.level == "error" for n in notes):
        return invalid_item(kind, ident, source, "project", notes)
    assert isinstance(document, dict)
    trust: TrustLevel = "explicit_remote" if kind == "http_adapter" else "project"
    fields: dict[str, Any] = {
        "name": document.get("name", ""),
        "enabled": document.get("enabled", True),
        "required": document.get("required", False),
        "capabilities": tuple(document.get("capabilities", ())),
        "allow_unknown_capability": document.get("allow_unknown_capability", False),
        "env": tuple(
            [*document.get("env", ())]
            + [document[k] for k in ("api_key_env", "endpoint_env") if k in document]
        ),
        "args": tuple(document.get("args", ())),
        "timeout_ms": document.get("timeout_ms", 0),
        "max_output_bytes": document.get("max_output_bytes", 0),
        "endpoint": document.get("endpoint", ""),
        "endpoint_env": document.get("endpoint_env", ""),
        "api_key_env": document.get("api_key_env", ""),
        "allowlists": _allowlists(document),
    }
    if document["transport"] == "skill":
        # The skill itself lives in a user directory; `link_skill_manifests` checks it is
        # there once every source has been scanned.
        fields.update(
            skill_class=kind,
            classified_by="manifest",
            runtime_gate=document.get("runtime_gate", ""),
            input_schema="input_schema" in document,
            output_schema="output_schema" in document,
        )
    elif kind == "cli_adapter":
        program, resolution_notes, resolved = _program(ctx, document["command"])
        fields.update(resolved)
        fields["program"] = program
        notes = [*notes, *resolution_notes]
    return DiscoveredItem(
        kind=kind, id=ident, source=source, trust=trust, diagnostics=tuple(notes), **fields
    )


def _program(ctx: ScanContext, command: str) -> tuple[str, list[Diagnostic], dict[str, Any]]:
    """A manifest's `command`: a program name looked up on $PATH, or an absolute path,
    which counts as a pin of that program."""
    name = Path(command).name
    pin_path = Path(command) if Path(command).is_absolute() else None
    override = ctx.settings.overrides.get(name)
    if pin_path is None and override is not None:
        pin_path = override.command_path
    resolution = resolve(name, ctx.env.get("PATH", ""), ctx.local_roots, ctx.config_dir, pin_path)
    return (
        name,
        list(resolution.diagnostics),
        {
            "candidates": resolution.candidates,
            "command": resolution.command,
            "pinned": resolution.pinned,
        },
    )


def _allowlists(document: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    return {k: tuple(document[k]) for k in ("tools", "resources", "prompts") if k in document}


def scan_capabilities(ctx: ScanContext) -> Found:
    root = ctx.project_dir("capabilities")
    files, notes = list_files(root, MANIFEST_SUFFIXES, ctx.limits, "capabilities/")
    items = builtin_capabilities()
    for path in files:
        items.extend(_capabilities(ctx, root, path))
    return Found(items, notes)


def _capabilities(ctx: ScanContext, root: Path, path: Path) -> list[DiscoveredItem]:
    document, source, notes = _read(ctx, root, path)
    if document is not None:
        notes = [*notes, *schema_diagnostics(document, CAPABILITIES, source.display)]
    if any(n.level == "error" for n in notes):
        return [
            invalid_item("capability", _capability_name(document, path), source, "project", notes)
        ]
    assert isinstance(document, dict)
    entries = document.get("capabilities", [document])
    items = []
    for entry in entries:
        descriptor = CapabilityDescriptor(
            name=entry["name"],
            side_effect=entry["side_effect"],
            description=entry.get("description", ""),
            input_schema=_schema_ref(root, entry.get("input_schema", "")),
            output_schema=_schema_ref(root, entry.get("output_schema", "")),
            default_timeout_ms=entry.get("default_timeout_ms", 30_000),
            allow_auto_route=entry.get("allow_auto_route", False),
            audit=tuple(entry.get("audit", ())),
        )
        entry_notes = list(notes)
        if descriptor.allow_auto_route and not descriptor.auto_routable:
            entry_notes.append(
                Diagnostic(
                    "warning",
                    "policy_denied",
                    f"{descriptor.name}: allow_auto_route is ignored for side effect "
                    f"{descriptor.side_effect!r} (only none and read_only_external route "
                    "automatically)",
                    source=source.display,
                )
            )
        for ref, which in (
            (entry.get("input_schema"), "input"),
            (entry.get("output_schema"), "output"),
        ):
            if ref and not _schema_ref(root, ref):
                entry_notes.append(
                    Diagnostic(
                        "error",
                        "schema_invalid",
                        f"{descriptor.name}: {which}_schema {ref!r} is not a file inside "
                        "capabilities/",
                        source=source.display,
                    )
                )
        items.append(capability_item(descriptor, source, entry_notes))
    return items


def _capability_name(document: Any, path: Path) -> str:
    value = document.get("name") if isinstance(document, dict) else None
    return value if isinstance(value, str) and value else path.stem.lower()


def _schema_ref(root: Path, ref: str) -> str:
    """A schema file named by a capability, kept only when it is a file inside `root`."""
    if not ref:
        return ""
    real_root = root.resolve()
    target = (root / ref).resolve()
    if not target.is_relative_to(real_root) or not target.is_file():
        return ""
    return str(target)


def scan_mcp(ctx: ScanContext) -> Found:
    """Explicit MCP manifests in mcp/: ours (.yaml), Claude-style mcpServers (.json) and
    Codex-style [mcp_servers] (.toml). Nothing is started here."""
    root = ctx.project_dir("mcp")
    return scan_mcp_dir(ctx, root, "project_manifest", "project", "mcp/")


def scan_mcp_dir(
    ctx: ScanContext, root: Path, source_kind: Any, trust: TrustLevel, label: str
) -> Found:
    files, notes = list_files(root, (".yaml", ".yml", ".json", ".toml"), ctx.limits, label)
    items: list[DiscoveredItem] = []
    for path in files:
        document, source, read_notes = _read(ctx, root, path)
        source = Source(source_kind, "mcp", source.path, source.display)
        if path.suffix in (".json", ".toml") and document is not None:
            items.extend(_foreign_mcp(document, path, source, trust, read_notes))
            continue
        if document is not None:
            read_notes = [*read_notes, *schema_diagnostics(document, MCP, source.display)]
        ident = _fallback_id(document, path)
        if any(n.level == "error" for n in read_notes) or not isinstance(document, dict):
            items.append(invalid_item("mcp_server", ident, source, trust, read_notes))
            continue
        # A stdio server of an explicit manifest may be started for a metadata probe
        # (`_mcp_probe`): its program is resolved as an adapter's is.
        probed = bool(document.get("command")) and source_kind == "project_manifest"
        _, resolution_notes, resolved = (
            _program(ctx, document["command"]) if probed else ("", [], {})
        )
        read_notes = [*read_notes, *resolution_notes]
        items.append(
            DiscoveredItem(
                kind="mcp_server",
                id=ident,
                source=source,
                trust=trust,
                enabled=document.get("enabled", True),
                required=document.get("required", False),
                capabilities=tuple(document.get("capabilities", ())) or _mcp_capabilities(document),
                program=Path(document.get("command", "")).name,
                args=tuple(document.get("args", ())),
                endpoint=document.get("endpoint", ""),
                env=tuple(document.get("env", ())),
                timeout_ms=document.get("timeout_ms", 0),
                allowlists=_allowlists(document),
                diagnostics=tuple(read_notes),
                **resolved,
            )
        )
    return Found(items, notes)


def _mcp_capabilities(document: dict[str, Any]) -> tuple[str, ...]:
    caps = {
        "tools": "mcp.tool.call",
        "resources": "mcp.resource.read",
        "prompts": "mcp.prompt.render",
    }
    return tuple(cap for key, cap in caps.items() if document.get(key))


def _foreign_mcp(
    document: Any, path: Path, source: Source, trust: TrustLevel, notes: list[Diagnostic]
) -> list[DiscoveredItem]:
    """Claude's `{"mcpServers": {...}}` or Codex's `[mcp_servers.<name>]`: servers with no
    allowlists, so nothing of them is exposed until a zeroclaw manifest lists it."""
    servers = document.get("mcpServers" if path.suffix == ".json" else "mcp_servers")
    if not isinstance(servers, dict):
        table = "mcpServers" if path.suffix == ".json" else "[mcp_servers]"
        missing = Diagnostic(
            "error",
            "schema_invalid",
            f"{source.display}: no {table} table",
            source=source.display,
            pointer="/",
        )
        return [invalid_item("mcp_server", path.stem.lower(), source, trust, [*notes, missing])]
    items = []
    for name, server in sorted(servers.items()):
        ident = name.lower() if isinstance(name, str) and _ID.match(name.lower()) else ""
        entry_notes = list(notes)
        if not ident or not isinstance(server, dict):
            entry_notes.append(
                Diagnostic(
                    "error",
                    "schema_invalid",
                    f"{source.display}: server {str(name)[:64]!r} is not usable",
                    source=source.display,
                )
            )
            items.append(
                invalid_item("mcp_server", ident or path.stem.lower(), source, trust, entry_notes)
            )
            continue
        env = server.get("env")
        entry_notes.append(
            Diagnostic(
                "info",
                "policy_denied",
                "no tools, resources or prompts allowlist: nothing of this server is exposed "
                "until a manifest in mcp/ lists them",
                source=source.display,
            )
        )
        command = server.get("command")
        items.append(
            DiscoveredItem(
                kind="mcp_server",
                id=ident,
                source=source,
                trust=trust,
                program=Path(command).name if isinstance(command, str) else "",
                endpoint=server.get("url", "") if isinstance(server.get("url"), str) else "",
                env=tuple(sorted(k for k in env if isinstance(k, str)))
                if isinstance(env, dict)
                else (),
                capabilities=("mcp.tool.call",),
                diagnostics=tuple(entry_notes),
            )
        )
    return items


def link_skill_manifests(items: list[DiscoveredItem]) -> list[DiscoveredItem]:
    """A skill manifest in adapters/ names a skill by its id and classifies it: the skill
    found in a user directory takes the manifest's kind (so the manifest, the stronger
    source, shadows it), and a manifest whose skill was not found is `unavailable`, with
    why. Pure: runs in phase A once every source is in, before anything is decided."""
    manifests = {
        i.id: i
        for i in items
        if i.classified_by == "manifest" and i.source.kind == "project_manifest"
    }
    found = {i.id for i in items if i.source.kind == "user_dir" and i.skill_class is not None}
    linked = []
    for item in items:
        manifest = manifests.get(item.id)
        if manifest is not None and item.source.kind == "user_dir" and item.skill_class:
            item = msgspec.structs.replace(
                item, kind=manifest.kind, skill_class=manifest.skill_class
            )
        elif manifest is item and item.id in found:
            item = msgspec.structs.replace(item, health=Health("available"))
        elif manifest is item:
            note = Diagnostic(
                "error",
                "io",
                f"no skill {item.id!r} in ~/.codex/skills or ~/.agents/skills",
                source=item.source.display,
            )
            item = msgspec.structs.replace(
                item,
                health=Health("unavailable", message="the skill it describes is not found"),
                diagnostics=(*item.diagnostics, note),
            )
        linked.append(item)
    return linked
