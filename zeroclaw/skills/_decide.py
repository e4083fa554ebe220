"""Whether an agent may load a skill: the decision, pure. What the filesystem showed (a
`SkillFacts`, gathered by `_gather`) and the agent's risk profile (a `ProfileFacts`) in;
a `LoadedSkill` or a `SkillRefused` with a reason code out.

In this order, the first failure deciding:

1. `skill_not_found`: no folder of that name under any skills dir, or one without a
   SKILL.md regular file;
2. `path_not_allowed`: the folder (symlinks resolved) leads out of its skills dir, or holds
   a symlink, a hard-linked file or anything but files and directories (each could lead
   out of it; ADR 0056);
3. `skill_too_large`: more than MAX_SKILL_ENTRIES entries or MAX_SKILL_DEPTH levels, or a
   SKILL.md over MAX_SKILL_MD_BYTES (all of it must fit what skill_read returns);
4. `front_matter_invalid`: see `_front.parse_front_matter`;
5. `undeclared_script`: a file that is executable or starts with `#!`, in a skill that
   declares no shell: what a skill needs is declared, never found out;
6. `permissions_exceed_profile`: a declared permission the agent's risk profile does not
   give (the Eva-CLI seed's rule, §9.2: no shell, network or workspace write it is not
   authorised for).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Literal, get_args

from ._front import SKILL_FILE, Permissions, parse_front_matter

SkillRefusal = Literal[
    "skill_not_found",
    "path_not_allowed",
    "skill_too_large",
    "front_matter_invalid",
    "undeclared_script",
    "permissions_exceed_profile",
]
SKILL_REFUSALS: tuple[SkillRefusal, ...] = get_args(SkillRefusal)

MAX_SKILL_MD_BYTES = 64 * 1024  # what skill_read returns at most (tools.MAX_SKILL_READ_BYTES)
MAX_SKILL_ENTRIES = 256
MAX_SKILL_DEPTH = 8

EntryKind = Literal["dir", "file", "symlink", "other"]


@dataclass(frozen=True)
class Entry:
    """One entry of a skill's folder, as lstat saw it (never followed)."""

    path: str  # relative to the skill's folder
    kind: EntryKind
    links: int = 1  # st_nlink of a file
    script: bool = False  # a file with an execute bit, or starting with "#!"


@dataclass(frozen=True)
class SkillFacts:
    """What the filesystem showed of one skill name under the skills dirs."""

    name: str
    root: str = ""  # the real path of the skills dir it was found in ("": not found)
    folder: str = ""  # the real path of its folder
    is_dir: bool = False
    entries: tuple[Entry, ...] = ()  # at most MAX_SKILL_ENTRIES + 1
    too_deep: bool = False  # a directory deeper than MAX_SKILL_DEPTH was not listed
    skill_md: bytes | None = None  # at most MAX_SKILL_MD_BYTES + 1; None: not a regular file

    @property
    def found(self) -> bool:
        return bool(self.folder)


@dataclass(frozen=True)
class ProfileFacts:
    """What an agent's risk profile gives, as far as a skill's permissions go."""

    profile: str
    level: Literal["readonly", "supervised", "full"]
    allowed_commands: frozenset[str] = frozenset()
    allowed_endpoints: frozenset[str] = frozenset()


@dataclass(frozen=True)
class LoadedSkill:
    name: str
    description: str  # one line
    folder: str  # the real path the agent reads it under
    permissions: Permissions = field(default_factory=Permissions)


@dataclass(frozen=True)
class SkillRefused:
    name: str
    code: SkillRefusal
    detail: str


def decide_skill(facts: SkillFacts, profile: ProfileFacts) -> LoadedSkill | SkillRefused:
    name = facts.name

    def refused(code: SkillRefusal, detail: str) -> SkillRefused:
        return SkillRefused(name, code, detail)

    if not facts.found:
        return refused("skill_not_found", "no folder of that name in the skills dirs")
    root, folder = PurePosixPath(facts.root), PurePosixPath(facts.folder)
    if root not in folder.parents:
        return refused("path_not_allowed", "its folder leads out of the skills dir (a symlink)")
    if not facts.is_dir:
        return refused("skill_not_found", "not a folder")
    odd = [e for e in facts.entries if e.kind != "dir" and (e.kind != "file" or e.links > 1)]
    if odd:
        return refused("path_not_allowed", f"{_odd(odd[0])}; a skill holds files and folders")
    if len(facts.entries) > MAX_SKILL_ENTRIES or facts.too_deep:
        return refused(
            "skill_too_large",
            f"more than {MAX_SKILL_ENTRIES} entries or {MAX_SKILL_DEPTH} levels of folders",
        )
    if facts.skill_md is None:
        return refused("skill_not_found", f"no {SKILL_FILE} file in its folder")
    if len(facts.skill_md) > MAX_SKILL_MD_BYTES:
        return refused("skill_too_large", f"{SKILL_FILE} is over {MAX_SKILL_MD_BYTES} bytes")
    try:
        text = facts.skill_md.decode("utf-8")
    except UnicodeDecodeError:
        return refused("front_matter_invalid", f"{SKILL_FILE} is not UTF-8")
    matter = parse_front_matter(text, name)
    if isinstance(matter, str):
        return refused("front_matter_invalid", matter)
    permissions = matter.permissions
    scripts = [e.path for e in facts.entries if e.script]
    if scripts and not permissions.runs_commands:
        return refused(
            "undeclared_script",
            f"ships {scripts[0]!r}, a script, but declares no shell permission",
        )
    gaps = permission_gaps(permissions, profile)
    if gaps:
        return refused("permissions_exceed_profile", "; ".join(gaps))
    return LoadedSkill(name, matter.description, facts.folder, permissions)


def _odd(entry: Entry) -> str:
    if entry.kind == "symlink":
        return f"{entry.path!r} is a symlink"
    if entry.kind == "file":
        return f"{entry.path!r} has {entry.links} hard links"
    return f"{entry.path!r} is neither a file nor a folder"


def permission_gaps(permissions: Permissions, profile: ProfileFacts) -> list[str]:
    """Each declared permission `profile` does not give, in words (empty: all given)."""
    gaps: list[str] = []
    named = f"risk profile {profile.profile!r}"
    readonly = profile.level == "readonly"
    if permissions.workspace_write and readonly:
        gaps.append(f"declares workspace_write; {named} is readonly")
    if permissions.runs_commands:
        if readonly:
            gaps.append(f"declares shell; {named} is readonly")
        elif not profile.allowed_commands:
            gaps.append(f"declares shell; {named} allows no command")
        missing = _missing(permissions.commands, profile.allowed_commands)
        if missing and not readonly and profile.allowed_commands:
            gaps.append(f"declares commands {missing}, not in the allowed_commands of {named}")
    if permissions.reaches_network:
        if not profile.allowed_endpoints:
            gaps.append(f"declares network; {named} allows no endpoint")
        else:
            missing = _missing(permissions.endpoints, profile.allowed_endpoints)
            if missing:
                gaps.append(
                    f"declares endpoints {missing}, not in the allowed_endpoints of {named}"
                )
    return gaps


def _missing(declared: Sequence[str], given: frozenset[str]) -> str:
    return ", ".join(sorted({d for d in declared if d not in given}))
