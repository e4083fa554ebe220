"""The sources that are not project manifests: configured agents and sub-agent bundles,
allowlisted programs on $PATH, user skill and prompt directories (and user MCP configs),
and serial ports. Each is a plain function of the scan context (blocking file reads; the
scan runs them in worker threads); probes happen later, in `_health`.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path

from ..config import channel_owners
from ..subagents import RESERVED_IDS, BundleProblems, front_matter, scan_bundles
from ._commands import BUILTIN_CAPABILITIES, resolve
from ._context import Found, ScanContext
from ._files import Unreadable, display_path, list_files, read_file
from ._model import (
    ClassifiedBy,
    DeviceState,
    Diagnostic,
    DiscoveredItem,
    Health,
    SkillClass,
    Source,
)
from ._project import invalid_item, scan_mcp_dir

CONFIG_SOURCE = Source("config", "agents", display="[agents]")


def scan_agents(ctx: ScanContext) -> Found:
    return Found(
        [
            DiscoveredItem(
                kind="agent",
                id=alias,
                source=Source("config", "agents", display=f"[agents.{alias}]"),
                trust="project",
                name=agent.description,
                enabled=agent.enabled,
                capabilities=("chat.reply",),
                health=Health("not_checked"),
            )
            for alias, agent in sorted(ctx.config.agents.items())
        ]
    )


def scan_subagents(ctx: ScanContext) -> Found:
    """Bundles through the sub-agent registry's own loader (same checks, same problems)."""
    loaded, refused = scan_bundles(
        ctx.subagents_dir,
        providers=frozenset(ctx.config.provider_ids()),
        reserved=RESERVED_IDS | frozenset(ctx.config.agents),
        mcp_servers={name: s.tools for name, s in ctx.config.mcp_servers.items()},
    )
    items: list[DiscoveredItem] = []
    base = ctx.subagents_dir
    for bundle in loaded:
        manifest = bundle.manifest
        path = base / manifest.id
        items.append(
            DiscoveredItem(
                kind="subagent",
                id=manifest.id,
                source=Source(
                    "project_manifest",
                    "subagents",
                    str(path / "agent.yaml"),
                    display_path(path / "agent.yaml", ctx.home, ctx.config_dir),
                ),
                trust="project",
                name=manifest.description,
                callers=manifest.policy.allowedCallers,
                effects=manifest.effects,
                input_schema=bundle.input_schema is not None,
                output_schema=bundle.output_schema is not None,
                health=Health("available", version=bundle.digest[:12]),
            )
        )
    items.extend(_refused_bundle(ctx, problems) for problems in refused)
    return Found(items)


_PATH_PROBLEM = re.compile(r"leads out|absolute path|symlink|not a regular file|not a path")


def _refused_bundle(ctx: ScanContext, refused: BundleProblems) -> DiscoveredItem:
    display = display_path(refused.path, ctx.home, ctx.config_dir)
    notes = tuple(
        Diagnostic(
            "error",
            "path_not_allowed"
            if _PATH_PROBLEM.search(problem)
            else "policy_denied"
            if "is reserved" in problem
            else "schema_invalid",
            problem,
            source=display,
        )
        for problem in refused.problems
    )
    source = Source("project_manifest", "subagents", str(refused.path), display)
    return invalid_item("subagent", refused.path.name, source, "project", notes)


def scan_path(ctx: ScanContext) -> Found:
    """Each allowlisted command on $PATH (with every candidate), or its pinned path."""
    items = []
    for name in ctx.settings.commands:
        override = ctx.settings.overrides.get(name)
        pin = override.command_path if override is not None else None
        resolution = resolve(name, ctx.env.get("PATH", ""), ctx.local_roots, ctx.config_dir, pin)
        if not resolution.candidates and pin is None:
            continue  # not installed: nothing found, nothing to say
        shown = resolution.command or (
            resolution.candidates[0].display if resolution.candidates else str(pin)
        )
        items.append(
            DiscoveredItem(
                kind="cli_adapter",
                id=name,
                source=Source(
                    "config" if pin is not None else "path",
                    "path",
                    resolution.command,
                    f"PATH:{shown}" if pin is None else f"pinned:{shown}",
                ),
                trust="system_path",
                program=name,
                command=resolution.command,
                candidates=resolution.candidates,
                pinned=resolution.pinned,
                capabilities=BUILTIN_CAPABILITIES.get(name, ()),
                diagnostics=resolution.diagnostics,
            )
        )
    return Found(items)


# --- user directories --------------------------------------------------------------------

_WORKER_HINT = re.compile(r"\b(worker|swarm|team[- ]?mode)\b", re.IGNORECASE)
_SKILL_CLASSES: tuple[SkillClass, ...] = ("prompt_role", "workflow_skill", "runtime_worker")


def _user_dirs(ctx: ScanContext) -> list[tuple[Path, str, str]]:
    home = ctx.home
    if home is None or not ctx.settings.scan_user_dirs:
        return []
    return [
        (home / ".codex" / "skills", "codex_skills", "skill"),
        (home / ".agents" / "skills", "agents_skills", "skill"),
        (home / ".codex" / "prompts", "codex_prompts", "prompt"),
        (home / ".agents" / "prompts", "agents_prompts", "prompt"),
    ]


def scan_user_skills(ctx: ScanContext) -> Found:
    """Skills and prompts in user directories, classified: explicit front matter first, then
    a trusted directory's convention, then a content heuristic (display-only). User MCP
    configs ($XDG_CONFIG_HOME/zeroclaw/mcp) are listed, never started."""
    items: list[DiscoveredItem] = []
    notes: list[Diagnostic] = []
    for directory, name, what in _user_dirs(ctx):
        if what == "prompt":
            files, dir_notes = list_files(directory, (".md",), ctx.limits, str(directory))
            notes.extend(dir_notes)
            items.extend(_prompt(ctx, directory, name, path) for path in files)
        else:
            paths, dir_notes = _skill_files(ctx, directory)
            notes.extend(dir_notes)
            items.extend(_skill(ctx, directory, name, path) for path in paths)
    user_mcp = ctx.user_config_dir
    if user_mcp is not None and ctx.settings.scan_user_dirs:
        found = scan_mcp_dir(ctx, user_mcp / "mcp", "user_dir", "user_local", str(user_mcp / "mcp"))
        items.extend(found.items)
        notes.extend(found.notes)
    return Found(items, notes)


def _skill_files(ctx: ScanContext, directory: Path) -> tuple[list[Path], list[Diagnostic]]:
    try:
        names = sorted(e.name for e in os.scandir(directory) if e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return [], []
    except PermissionError:
        return [], [Diagnostic("warning", "permission_denied", f"{directory}: permission denied")]
    notes = []
    if len(names) > ctx.limits.max_files_per_dir:
        notes.append(
            Diagnostic(
                "warning",
                "io",
                f"{directory}: {len(names)} skills, only the first {ctx.limits.max_files_per_dir} "
                "were read (max_files_per_dir)",
            )
        )
        names = names[: ctx.limits.max_files_per_dir]
    return [directory / name / "SKILL.md" for name in names], notes


def _skill(ctx: ScanContext, root: Path, name: str, path: Path) -> DiscoveredItem:
    display = display_path(path, ctx.home)
    source = Source("user_dir", name, str(path), display)
    ident = path.parent.name.lower()
    try:
        data, _ = read_file(path, root, ctx.limits, display)
    except Unreadable as exc:
        return invalid_item("workflow_skill", ident, source, "user_local", [exc.diagnostic])
    text = data.decode("utf-8", errors="replace")
    meta = front_matter(text) or {}
    declared = meta.get("kind") or meta.get("type")
    classified_by: ClassifiedBy
    skill_class: SkillClass
    if isinstance(declared, str) and declared in _SKILL_CLASSES:
        skill_class, classified_by = declared, "front_matter"
    else:
        worker = _WORKER_HINT.search(ident) or _WORKER_HINT.search(text[:4096])
        skill_class = "runtime_worker" if worker else "workflow_skill"
        classified_by = "heuristic"
    capabilities = meta.get("capabilities")
    return DiscoveredItem(
        kind=skill_class,
        id=str(meta.get("name") or ident)[:64].lower(),
        source=source,
        trust="user_local",
        name=str(meta.get("description", ""))[:200],
        skill_class=skill_class,
        classified_by=classified_by,
        runtime_gate=str(meta.get("runtime_gate", "")),
        input_schema=bool(meta.get("input_schema")),
        output_schema=bool(meta.get("output_schema")),
        capabilities=tuple(str(c) for c in capabilities) if isinstance(capabilities, list) else (),
    )


def _prompt(ctx: ScanContext, root: Path, name: str, path: Path) -> DiscoveredItem:
    return DiscoveredItem(
        kind="prompt_role",
        id=path.stem.lower()[:64],
        source=Source("user_dir", name, str(path), display_path(path, ctx.home)),
        trust="user_local",
        skill_class="prompt_role",
        classified_by="trusted_dir",
    )


# --- serial ports --------------------------------------------------------------------------


def scan_serial(ctx: ScanContext) -> Found:
    """Ports the system lists, and the ports serial channels name: `observed` when no
    channel names it, `matched` when a channel names it but no enabled agent owns that
    channel, `authorized` when one does. Nothing is opened."""
    named: dict[str, list[str]] = {}
    for alias, channel in ctx.config.channels.serial.items():
        named.setdefault(os.path.realpath(channel.port), []).append(f"serial.{alias}")
    owners = channel_owners(ctx.config)
    seen: dict[str, str] = {}  # canonical -> display
    for device in _listed_ports():
        seen.setdefault(os.path.realpath(device), device)
    for canonical in named:
        seen.setdefault(canonical, canonical)
    items = []
    for canonical, shown in sorted(seen.items()):
        channels = named.get(canonical, [])
        state: DeviceState = "observed"
        if channels:
            state = "authorized" if any(owners.get(c) for c in channels) else "matched"
        present = _is_char_device(canonical)
        items.append(
            DiscoveredItem(
                kind="serial_device",
                id=canonical,
                source=Source("config" if channels else "system", "serial", canonical, shown),
                trust="project" if channels else "user_local",
                device_state=state,
                name=", ".join(channels),
                health=Health("available" if present else "unavailable"),
                diagnostics=()
                if present
                else (Diagnostic("warning", "io", f"{shown} is not present (or not a tty)"),),
            )
        )
    return Found(items)


def _listed_ports() -> list[str]:
    devices: list[str] = []
    try:
        from serial.tools import list_ports  # type: ignore[import-untyped]

        devices.extend(port.device for port in list_ports.comports())
    except Exception:  # a listing failure is not a scan failure
        pass
    with contextlib.suppress(OSError):
        devices.extend(str(p) for p in sorted(Path("/dev/serial/by-id").iterdir()))
    return devices


def _is_char_device(path: str) -> bool:
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False
