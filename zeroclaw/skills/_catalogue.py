"""Every enabled agent's skills, loaded from a config (ADR 0056): what `config validate`
reports, what the daemon checks at its start and at each reload before anything changes,
and what an agent's spec carries.

One look per skill name (several agents may list one), one decision per agent (the same
skill may suit one agent's profile and exceed another's). Blocking I/O: the daemon runs it
in a thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..config import Config, ConfigIssue, skills_dirs
from ._decide import (
    LoadedSkill,
    ProfileFacts,
    SkillFacts,
    SkillRefusal,
    SkillRefused,
    decide_skill,
)
from ._gather import gather

# What the operator can do about each refusal (appended to the message).
FIXES: dict[SkillRefusal, str] = {
    "skill_not_found": "add the folder, or fix the name",
    "path_not_allowed": "make the skill a plain folder of files inside a skills dir",
    "skill_too_large": "split it into smaller skills",
    "front_matter_invalid": "fix its SKILL.md front matter",
    "undeclared_script": "declare permissions: {shell: true} (and its commands), or drop "
    "the script",
    "permissions_exceed_profile": "give the agent a risk profile that allows it, or leave "
    "the skill out",
}


@dataclass(frozen=True)
class AgentSkillRefused:
    alias: str
    index: int  # in the agent's `skills` list
    refused: SkillRefused

    def issue(self) -> ConfigIssue:
        r = self.refused
        return ConfigIssue(
            ("agents", self.alias, "skills", self.index),
            f"skill {r.name!r} refused ({r.code}): {r.detail}; {FIXES[r.code]}",
            code=r.code,
        )


@dataclass(frozen=True)
class SkillCatalogue:
    """The skills each enabled agent loads, in its `skills` order, and those refused."""

    loaded: dict[str, tuple[LoadedSkill, ...]] = field(default_factory=dict)
    refused: tuple[AgentSkillRefused, ...] = ()

    def issues(self) -> list[ConfigIssue]:
        return [r.issue() for r in self.refused]


def profile_facts(config: Config, alias: str) -> ProfileFacts | None:
    """What the agent's risk profile gives a skill (None: it has no valid profile, which
    the config's own rules report)."""
    name = config.agents[alias].risk_profile
    profile = config.risk_profiles.get(name) if name is not None else None
    if name is None or profile is None:
        return None
    return ProfileFacts(
        name,
        profile.level,
        frozenset(profile.allowed_commands),
        frozenset(profile.allowed_endpoints),
    )


def load_catalogue(config: Config, config_path: Path) -> SkillCatalogue:
    """Each enabled agent's skills, looked up under `skills_dirs(config, config_path)`."""
    roots = [str(d) for d in skills_dirs(config, config_path)]
    seen: dict[str, SkillFacts] = {}
    loaded: dict[str, tuple[LoadedSkill, ...]] = {}
    refused: list[AgentSkillRefused] = []
    for alias, agent in sorted(config.agents.items()):
        profile = profile_facts(config, alias)
        if not agent.enabled or not agent.skills or profile is None:
            continue
        mine: list[LoadedSkill] = []
        for index, name in enumerate(agent.skills):
            facts = seen.get(name)
            if facts is None:
                facts = seen[name] = gather(roots, name)
            decided = decide_skill(facts, profile)
            if isinstance(decided, SkillRefused) and decided.code == "skill_not_found":
                where = ", ".join(roots) or "none configured"
                decided = replace(decided, detail=f"{decided.detail} (skills dirs: {where})")
            if isinstance(decided, SkillRefused):
                refused.append(AgentSkillRefused(alias, index, decided))
            else:
                mine.append(decided)
        loaded[alias] = tuple(mine)
    return SkillCatalogue(loaded, tuple(refused))
