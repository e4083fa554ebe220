"""A sub-agent runtime's only tools (issue 12): `skill_read` and `subagent_submit_result`.

`skill_read` reads one file of the revision's snapshot (its skills, prompt and schemas),
named relative to the snapshot; anything that would resolve elsewhere (an absolute path,
`..`, a symlink) is refused with `subagent_skill_path_not_allowed` before anything is
opened, and what is read is bounded. Landlock enforces the same limit underneath.

`subagent_submit_result` hands the runtime the sub-agent's result. Its parameters are the
revision's output schema itself, so a model is told the contract; when there is no output
schema, or the schema does not describe an object (tool arguments always are one), the
tool takes `{"result": ...}` and the result is that value. It checks nothing beyond the
shape of its arguments: the daemon validates the result against the output schema, being
the trust boundary.

Both are plain functions over plain values, not `Tool`s: they need no `ToolContext` (no
memory, peers, shell or approvals reach a sub-agent) and their specs are built directly.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal, get_args

from ..providers import ToolSpec
from ._base import ToolErrorCode

SKILL_READ = "skill_read"
SUBMIT_RESULT = "subagent_submit_result"
MAX_SKILL_READ_BYTES = 64 * 1024
MAX_LISTED_ENTRIES = 200

# The codes only a sub-agent runtime's tools produce (the shared ones are ToolErrorCode).
SnapshotErrorCode = Literal["subagent_skill_path_not_allowed"]
SNAPSHOT_ERROR_CODES: tuple[str, ...] = get_args(SnapshotErrorCode)


@dataclass(frozen=True)
class SnapshotResult:
    """One call's outcome. `result` is the submitted value (submit only, when ok)."""

    ok: bool
    output: str = ""
    error_code: ToolErrorCode | SnapshotErrorCode | None = None
    detail: str = ""
    result: object = None


def _io_error(path: str, exc: OSError) -> SnapshotResult:
    return SnapshotResult(
        False, "", "io_error", f"{path}: {errno.errorcode.get(exc.errno or 0, exc)}"
    )


def _not_allowed(path: object, why: str) -> SnapshotResult:
    return SnapshotResult(False, "", "subagent_skill_path_not_allowed", f"{path!r}: {why}")


SKILL_READ_SPEC = ToolSpec(
    SKILL_READ,
    "Read a file of this sub-agent: a skill (skills/<name>/SKILL.md), SYSTEM.md, "
    "manifest.json or a schema (schemas/output.json). The path is relative to the "
    "sub-agent's files; a directory path lists its entries.",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "e.g. skills/<name>/SKILL.md"},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
)


def skill_read(root: str, path: object, limit: int = MAX_SKILL_READ_BYTES) -> SnapshotResult:
    """The text of `path` inside the snapshot `root` (blocking; run it in a thread).

    Refused before any open: a non-string, empty, absolute, NUL-carrying or `..` path, and
    any path whose real location differs from its lexical one (a symlink on the way). The
    final open also refuses to follow a symlink (O_NOFOLLOW)."""
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        return _not_allowed(path, "not a relative path")
    rel = PurePosixPath(path.strip())
    if rel.is_absolute():
        return _not_allowed(path, "an absolute path; paths are relative to the sub-agent")
    if ".." in rel.parts:
        return _not_allowed(path, "'..' leads out of the sub-agent's files")
    real_root = os.path.realpath(root)
    lexical = os.path.normpath(os.path.join(real_root, *rel.parts))
    if os.path.realpath(lexical) != lexical:
        return _not_allowed(path, "a symlink; only the sub-agent's own files can be read")
    try:
        fd = os.open(lexical, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return SnapshotResult(False, "", "not_found", f"{path}: no such file")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _not_allowed(path, "a symlink; only the sub-agent's own files can be read")
        return _io_error(path, exc)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            names = sorted(os.listdir(fd))[:MAX_LISTED_ENTRIES]
            return SnapshotResult(True, "\n".join(names))
        if not stat.S_ISREG(mode):
            return SnapshotResult(False, "", "not_a_regular_file", f"{path}: not a regular file")
        data = os.read(fd, limit + 1)
    except OSError as exc:
        return _io_error(path, exc)
    finally:
        os.close(fd)
    text = data[:limit].decode("utf-8", errors="replace")
    if len(data) > limit:
        text += f"\n[truncated at {limit} bytes]"
    return SnapshotResult(True, text)


def wraps_result(output_schema: dict[str, object] | None) -> bool:
    """Whether submit takes `{"result": ...}` instead of the result itself: no output
    schema, or one that does not describe an object."""
    return output_schema is None or output_schema.get("type") != "object"


def submit_spec(output_schema: dict[str, object] | None) -> ToolSpec:
    """The submit tool as a model is told about it: its parameters are the output schema."""
    description = (
        "Submit this sub-agent's result; its arguments are the result, shaped by the output "
        "schema. The last successful submit is the result. Call it once you are done."
    )
    if not wraps_result(output_schema):
        assert output_schema is not None
        return ToolSpec(SUBMIT_RESULT, description, dict(output_schema))
    inner: dict[str, object] = {"type": "object"} if output_schema is None else dict(output_schema)
    parameters = {
        "type": "object",
        "properties": {"result": inner},
        "required": ["result"],
        "additionalProperties": False,
    }
    return ToolSpec(
        SUBMIT_RESULT, "Submit this sub-agent's result as `result`. " + description, parameters
    )


def submit_result(output_schema: dict[str, object] | None, args: object) -> SnapshotResult:
    """The value submitted by `args` (not validated against the schema: the daemon does)."""
    if not isinstance(args, dict):
        return SnapshotResult(False, "", "bad_arguments", "the result is a JSON object")
    if not wraps_result(output_schema):
        return SnapshotResult(True, "submitted", result=dict(args))
    if "result" not in args:
        return SnapshotResult(False, "", "bad_arguments", 'submit the result as {"result": ...}')
    value = args["result"]
    if output_schema is None and not isinstance(value, dict):
        return SnapshotResult(False, "", "bad_arguments", "the result is a JSON object")
    return SnapshotResult(True, "submitted", result=value)
