"""The tools a model may call, described once for every provider. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: tuple[tuple[str, str], ...]  # (name, description); all are required strings

    def json_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {p: {"type": "string", "description": d} for p, d in self.params},
            "required": [p for p, _ in self.params],
            "additionalProperties": False,
        }


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("file_read", "Read a text file in the workspace.", (("path", "Relative path."),)),
    ToolSpec(
        "file_write",
        "Write (replace) a text file in the workspace.",
        (("path", "Relative path."), ("content", "The whole new content.")),
    ),
    ToolSpec("file_list", "List a directory in the workspace.", (("path", "Relative path."),)),
    ToolSpec(
        "shell",
        "Run one allowed command (no shell syntax) with the workspace as cwd.",
        (("command", "The command line, e.g. 'ls -l'."),),
    ),
    ToolSpec(
        "memory_store",
        "Remember a fact under a key (replaces that key).",
        (("key", "Short stable key."), ("content", "The fact.")),
    ),
    ToolSpec("memory_recall", "Search remembered facts.", (("query", "Keywords."),)),
    ToolSpec("memory_forget", "Forget the fact under a key.", (("key", "The key."),)),
    ToolSpec(
        "send_message_to_peer",
        "Ask a peer agent something and get its reply.",
        (("to", "The peer's alias."), ("text", "The message.")),
    ),
    ToolSpec(
        "delegate",
        "Hand a task to an agent this agent may delegate to, and get its result.",
        (("to", "The agent's alias."), ("text", "The task.")),
    ),
)
TOOLS_BY_NAME = {t.name: t for t in TOOLS}


def bad_arguments(name: str, args: object) -> str | None:
    """Why a model's call cannot run (unknown tool, missing or non-string argument)."""
    spec = TOOLS_BY_NAME.get(name)
    if spec is None:
        return f"no tool {name!r}"
    if not isinstance(args, dict):
        return "arguments must be an object"
    for param, _ in spec.params:
        if not isinstance(args.get(param), str):
            return f"argument {param!r} must be a string"
    return None
