"""Whether an agent may load a skill (pure): each reason code from the facts that cause
it, in the documented order, and the permission check against every risk profile."""

from __future__ import annotations

from dataclasses import replace
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.skills import (
    MAX_SKILL_DEPTH,
    MAX_SKILL_ENTRIES,
    MAX_SKILL_MD_BYTES,
    SKILL_REFUSALS,
    Entry,
    LoadedSkill,
    Permissions,
    ProfileFacts,
    SkillFacts,
    SkillRefusal,
    SkillRefused,
    decide_skill,
    permission_gaps,
)

ROOT = "/srv/skills"
PLAIN = b"---\nname: notes\ndescription: Take notes.\n---\nbody\n"
SUP = ProfileFacts("sup", "supervised", frozenset({"git", "ls"}), frozenset({"h:1"}))
READONLY = ProfileFacts("ro", "readonly", frozenset({"git"}), frozenset())


def facts(skill_md: bytes | None = PLAIN, *entries: Entry, **changes: object) -> SkillFacts:
    base = SkillFacts(
        "notes",
        ROOT,
        f"{ROOT}/notes",
        is_dir=True,
        entries=(Entry("SKILL.md", "file"), *entries),
        skill_md=skill_md,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def front(permissions: str) -> bytes:
    return f"---\nname: notes\ndescription: d\npermissions: {permissions}\n---\n".encode()


def code(decided: LoadedSkill | SkillRefused) -> SkillRefusal | None:
    return decided.code if isinstance(decided, SkillRefused) else None


def test_a_plain_skill_loads_for_every_level() -> None:
    for level in ("readonly", "supervised", "full"):
        decided = decide_skill(facts(), ProfileFacts("p", level))  # type: ignore[arg-type]
        assert decided == LoadedSkill("notes", "Take notes.", f"{ROOT}/notes", Permissions())


CASES: list[tuple[str, SkillFacts, SkillRefusal]] = [
    ("no such folder", SkillFacts("notes"), "skill_not_found"),
    ("a file, not a folder", facts(is_dir=False), "skill_not_found"),
    ("no SKILL.md", facts(None), "skill_not_found"),
    ("a symlink out of the dir", facts(folder="/etc/notes"), "path_not_allowed"),
    ("the dir itself", facts(folder=ROOT), "path_not_allowed"),
    ("a sibling dir's prefix", facts(folder=f"{ROOT}-evil/notes"), "path_not_allowed"),
    ("a symlink inside", facts(PLAIN, Entry("docs/x", "symlink")), "path_not_allowed"),
    ("a fifo inside", facts(PLAIN, Entry("pipe", "other")), "path_not_allowed"),
    ("a hard link inside", facts(PLAIN, Entry("x", "file", links=2)), "path_not_allowed"),
    (
        "too many entries",
        facts(PLAIN, *(Entry(f"f{i}", "file") for i in range(MAX_SKILL_ENTRIES))),
        "skill_too_large",
    ),
    ("too deep", facts(too_deep=True), "skill_too_large"),
    ("a huge SKILL.md", facts(PLAIN + b"x" * MAX_SKILL_MD_BYTES), "skill_too_large"),
    ("not UTF-8", facts(b"---\nname: notes\ndescription: \xff\n---\n"), "front_matter_invalid"),
    ("no front matter", facts(b"# notes\n"), "front_matter_invalid"),
    (
        "a script, nothing declared",
        facts(PLAIN, Entry("run.sh", "file", script=True)),
        "undeclared_script",
    ),
    ("shell for readonly", facts(front("{shell: true}")), "permissions_exceed_profile"),
]


@pytest.mark.parametrize(("case", "given_facts", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_refusal(case: str, given_facts: SkillFacts, expected: SkillRefusal) -> None:
    decided = decide_skill(given_facts, READONLY)
    assert code(decided) == expected, decided
    assert isinstance(decided, SkillRefused) and decided.detail and decided.name == "notes"


def test_every_reason_code_has_a_case() -> None:
    assert {c[2] for c in CASES} == set(SKILL_REFUSALS) == set(get_args(SkillRefusal))


def test_the_first_failure_decides() -> None:
    # An escaping folder is refused for that, whatever else is wrong with it.
    worst = facts(b"junk", Entry("l", "symlink"), folder="/etc/x", too_deep=True)
    assert code(decide_skill(worst, SUP)) == "path_not_allowed"
    # A symlink inside is refused before the size is looked at.
    many = facts(PLAIN, Entry("l", "symlink"), *(Entry(f"f{i}", "file") for i in range(300)))
    assert code(decide_skill(many, SUP)) == "path_not_allowed"
    # The front matter is judged before the scripts; the scripts before the profile.
    script = Entry("run.sh", "file", script=True)
    assert code(decide_skill(facts(b"no", script), SUP)) == "front_matter_invalid"
    bad_perms = front("{workspace_write: true}")
    assert code(decide_skill(facts(bad_perms, script), READONLY)) == "undeclared_script"


def test_a_script_is_fine_when_the_skill_declares_commands() -> None:
    script = Entry("bin/lint", "file", script=True)
    loaded = decide_skill(facts(front("{commands: [git]}"), script), SUP)
    assert isinstance(loaded, LoadedSkill) and loaded.permissions.commands == ("git",)


def test_deep_and_wide_skills_at_their_caps_load() -> None:
    entries = [Entry(f"d{i}", "dir") for i in range(MAX_SKILL_DEPTH)]
    entries += [Entry(f"f{i}", "file") for i in range(MAX_SKILL_ENTRIES - len(entries) - 1)]
    at_cap = facts(PLAIN + b"x" * (MAX_SKILL_MD_BYTES - len(PLAIN)), *entries)
    assert isinstance(decide_skill(at_cap, SUP), LoadedSkill)


@pytest.mark.parametrize(
    ("declared", "profile", "gap"),
    [
        ("{workspace_write: true}", READONLY, "readonly"),
        ("{shell: true}", READONLY, "readonly"),
        ("{shell: true}", ProfileFacts("bare", "full"), "allows no command"),
        ("{commands: [git, curl]}", SUP, "curl"),
        ("{network: true}", READONLY, "allows no endpoint"),
        ("{endpoints: ['h:1', 'h:2']}", SUP, "h:2"),
    ],
)
def test_permissions_beyond_the_profile(declared: str, profile: ProfileFacts, gap: str) -> None:
    decided = decide_skill(facts(front(declared)), profile)
    assert isinstance(decided, SkillRefused) and decided.code == "permissions_exceed_profile"
    assert gap in decided.detail and repr(profile.profile) in decided.detail


PERMISSIONS = st.builds(
    Permissions,
    workspace_write=st.booleans(),
    shell=st.booleans(),
    commands=st.lists(st.sampled_from(["git", "ls", "curl"]), max_size=3).map(tuple),
    network=st.booleans(),
    endpoints=st.lists(st.sampled_from(["h:1", "h:2"]), max_size=2).map(tuple),
)
PROFILES = st.builds(
    ProfileFacts,
    profile=st.just("p"),
    level=st.sampled_from(["readonly", "supervised", "full"]),
    allowed_commands=st.frozensets(st.sampled_from(["git", "ls", "curl"])),
    allowed_endpoints=st.frozensets(st.sampled_from(["h:1", "h:2"])),
)


def covered(p: Permissions, profile: ProfileFacts) -> bool:
    """The rule, written as the ADR states it."""
    acts = profile.level != "readonly"
    return (
        (not p.workspace_write or acts)
        and (not (p.shell or p.commands) or (acts and bool(profile.allowed_commands)))
        and set(p.commands) <= profile.allowed_commands
        and (not (p.network or p.endpoints) or bool(profile.allowed_endpoints))
        and set(p.endpoints) <= profile.allowed_endpoints
    )


@given(PERMISSIONS, PROFILES)
def test_a_skill_is_refused_exactly_when_it_declares_what_its_profile_does_not_give(
    p: Permissions, profile: ProfileFacts
) -> None:
    assert (not permission_gaps(p, profile)) == covered(p, profile)


@given(PERMISSIONS, PROFILES, PROFILES)
def test_a_wider_profile_never_refuses_what_a_narrower_one_loads(
    p: Permissions, narrow: ProfileFacts, other: ProfileFacts
) -> None:
    order = ["readonly", "supervised", "full"]
    wide = ProfileFacts(
        "wide",
        max(narrow.level, other.level, key=order.index),  # type: ignore[arg-type]
        narrow.allowed_commands | other.allowed_commands,
        narrow.allowed_endpoints | other.allowed_endpoints,
    )
    if not permission_gaps(p, narrow):
        assert not permission_gaps(p, wide)


@given(PROFILES)
def test_declaring_nothing_suits_every_profile(profile: ProfileFacts) -> None:
    assert not permission_gaps(Permissions(), profile)
