"""Skills for agents (issue 27, ADR 0056): `[agents.<a>] skills` names folders under the
skills dirs, each a SKILL.md with front matter (name, description, declared permissions)
and the files it refers to.

Loading is a decision per agent and skill: what the filesystem shows (`gather`, never
following a symlink, bounded) judged against the agent's risk profile (`decide_skill`,
pure), with a reason code from `SkillRefusal` when refused. `load_catalogue` does it for
every enabled agent of a config; the daemon refuses a start or a reload with any skill
refused, and `config validate` warns of each. The agent side (its prompt's listing and
the `skill_read` tool) gets only what was loaded, through its spec.
"""

from ._catalogue import FIXES, AgentSkillRefused, SkillCatalogue, load_catalogue, profile_facts
from ._decide import (
    MAX_SKILL_DEPTH,
    MAX_SKILL_ENTRIES,
    MAX_SKILL_MD_BYTES,
    SKILL_REFUSALS,
    Entry,
    EntryKind,
    LoadedSkill,
    ProfileFacts,
    SkillFacts,
    SkillRefusal,
    SkillRefused,
    decide_skill,
    permission_gaps,
)
from ._front import (
    MAX_DESCRIPTION_CHARS,
    MAX_FRONT_MATTER_BYTES,
    SKILL_FILE,
    SKILL_NAME,
    FrontMatter,
    Permissions,
    one_line,
    parse_front_matter,
)
from ._gather import gather

__all__ = [
    "FIXES",
    "MAX_DESCRIPTION_CHARS",
    "MAX_FRONT_MATTER_BYTES",
    "MAX_SKILL_DEPTH",
    "MAX_SKILL_ENTRIES",
    "MAX_SKILL_MD_BYTES",
    "SKILL_FILE",
    "SKILL_NAME",
    "SKILL_REFUSALS",
    "AgentSkillRefused",
    "Entry",
    "EntryKind",
    "FrontMatter",
    "LoadedSkill",
    "Permissions",
    "ProfileFacts",
    "SkillCatalogue",
    "SkillFacts",
    "SkillRefusal",
    "SkillRefused",
    "decide_skill",
    "gather",
    "load_catalogue",
    "one_line",
    "parse_front_matter",
    "permission_gaps",
    "profile_facts",
]
