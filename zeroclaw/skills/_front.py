"""A skill's SKILL.md front matter: its name, its description and the permissions it
declares, read and judged. Pure: text in, a `FrontMatter` or why not out.

    ---
    name: release-notes
    description: Draft release notes from the changes since the last tag.
    permissions:            # what following the skill needs; all optional, default none
      workspace_write: true # writes files in the agent's workspace
      shell: true           # runs commands
      commands: [git]       # ... these programs (implies shell)
      network: false        # reaches an endpoint besides the model provider
      endpoints: []         # ... these host:port (implies network)
    ---
    The body: instructions, read on demand with skill_read.

Other top-level keys (`license`, `metadata`, ...) are ignored; an unknown key inside
`permissions` is refused, as a permission that cannot be judged cannot be granted.
"""

from __future__ import annotations

import re

import msgspec

from .._yaml import YamlError, front_matter_text, safe_load

SKILL_FILE = "SKILL.md"
# A skill's folder name: the same syntax as zeroclaw.config's SKILL_NAME (a test keeps
# them equal; the config does not import this package).
SKILL_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
MAX_FRONT_MATTER_BYTES = 8 * 1024
MAX_DESCRIPTION_CHARS = 1024
# A bare program name, as a risk profile's allowed_commands holds them.
_COMMAND = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
_ENDPOINT = re.compile(r"^[A-Za-z0-9.\-\[\]:]{1,255}:[0-9]{1,5}$")


class Permissions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What following a skill needs from its agent, as the skill declares it."""

    workspace_write: bool = False
    shell: bool = False
    commands: tuple[str, ...] = ()
    network: bool = False
    endpoints: tuple[str, ...] = ()

    @property
    def runs_commands(self) -> bool:
        return self.shell or bool(self.commands)

    @property
    def reaches_network(self) -> bool:
        return self.network or bool(self.endpoints)


class FrontMatter(msgspec.Struct, frozen=True):
    """The keys zeroclaw reads (others are ignored)."""

    name: str
    description: str
    permissions: Permissions = Permissions()


def parse_front_matter(text: str, folder: str) -> FrontMatter | str:
    """The front matter of the SKILL.md in the folder named `folder`, its description made
    one line; or why it is not acceptable."""
    block = front_matter_text(text)
    if block is None:
        return "SKILL.md starts with YAML front matter between '---' lines"
    if len(block.encode()) > MAX_FRONT_MATTER_BYTES:
        return f"the front matter is over {MAX_FRONT_MATTER_BYTES} bytes"
    try:
        raw = safe_load(block)
    except YamlError as exc:
        where = f" (line {exc.line + 2})" if exc.line is not None else ""
        return f"the front matter is not YAML{where}"
    except RecursionError:
        return "the front matter is nested too deeply"
    if not isinstance(raw, dict):
        return "the front matter is a mapping (name, description, permissions)"
    try:
        matter = msgspec.convert(raw, FrontMatter)
    except (msgspec.ValidationError, RecursionError) as exc:
        return f"the front matter: {exc}"
    if matter.name != folder:
        return f"name {matter.name!r} differs from its folder name {folder!r}"
    description = one_line(matter.description)
    if description is None:
        return "the description holds control or invisible characters"
    if not description:
        return "the description is empty; say in one line what the skill is for"
    if len(description) > MAX_DESCRIPTION_CHARS:
        return f"the description is over {MAX_DESCRIPTION_CHARS} characters"
    permissions = matter.permissions
    bad = [c for c in permissions.commands if not _COMMAND.match(c)]
    if bad:
        return f"permissions.commands: {', '.join(map(repr, bad))} not a bare program name"
    bad = [e for e in permissions.endpoints if not _ENDPOINT.match(e)]
    if bad:
        return f"permissions.endpoints: {', '.join(map(repr, bad))} not 'host:port'"
    if permissions.commands and not permissions.shell and "shell" in _declared(raw):
        return "permissions: commands listed with shell: false"
    if permissions.endpoints and not permissions.network and "network" in _declared(raw):
        return "permissions: endpoints listed with network: false"
    return msgspec.structs.replace(matter, description=description)


def _declared(raw: dict[object, object]) -> dict[object, object]:
    permissions = raw.get("permissions")
    return permissions if isinstance(permissions, dict) else {}


def one_line(text: str) -> str | None:
    """`text` with every run of whitespace (newlines included) made one space; None when
    it holds a character that is neither printable nor whitespace (a control, a bidi
    override, a zero-width or tag character): a description never hides or reorders text."""
    joined = " ".join(text.split())
    return joined if joined.isprintable() else None
