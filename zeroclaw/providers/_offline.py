"""The built-in offline provider: deterministic, no network. Pure.

It turns a small documented grammar into real tool calls, so every path of the system
runs without a model; anything else gets a plain answer from a few rules.

    remember: TEXT          -> memory_store   (key derived from the text)
    recall QUERY            -> memory_recall
    forget KEY              -> memory_forget
    ask ALIAS: TEXT         -> send_message_to_peer
    delegate ALIAS: TEXT    -> delegate
    read PATH               -> file_read
    write PATH: TEXT        -> file_write
    list [PATH]             -> file_list
    run COMMAND             -> shell
    history                 -> (no tool) what was said earlier in this session

After the tools ran, `reply()` turns their results into the answer.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection

from ._types import Conversation, HistoryTurn, OnDelta, Step, ToolCall, ToolOutcome

_ALIAS = r"@?([a-z][a-z0-9_-]{0,31})"
# Each form of the grammar, the tool it calls, and how `help` spells it.
_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"^remember\s*:\s*(?P<text>.+)$", re.S | re.I), "memory_store", "remember: TEXT"),
    (re.compile(r"^recall\s+(?P<query>.+)$", re.S | re.I), "memory_recall", "recall QUERY"),
    (re.compile(r"^forget\s+(?P<key>\S+)\s*$", re.I), "memory_forget", "forget KEY"),
    (
        re.compile(rf"^ask\s+{_ALIAS}\s*:\s*(?P<text>.+)$", re.S | re.I),
        "send_message_to_peer",
        "ask ALIAS: TEXT",
    ),
    (
        re.compile(rf"^delegate\s+{_ALIAS}\s*:\s*(?P<text>.+)$", re.S | re.I),
        "delegate",
        "delegate ALIAS: TEXT",
    ),
    (re.compile(r"^read\s+(?P<path>\S+)\s*$", re.I), "file_read", "read PATH"),
    (
        re.compile(r"^write\s+(?P<path>[^:\s]+)\s*:\s?(?P<text>.*)$", re.S | re.I),
        "file_write",
        "write PATH: TEXT",
    ),
    (re.compile(r"^list(?:\s+(?P<path>\S+))?\s*$", re.I), "file_list", "list [PATH]"),
    (re.compile(r"^run\s+(?P<command>.+)$", re.S | re.I), "shell", "run COMMAND"),
)
GRAMMAR_TOOLS: tuple[str, ...] = tuple(tool for _, tool, _ in _RULES)


def grammar_help(offered: Collection[str] | None = None) -> str:
    """The forms this provider understands for the tools `offered` (None: all of them)."""
    forms = [f"'{form}'" for _, tool, form in _RULES if offered is None or tool in offered]
    return "I understand: " + ", ".join([*forms, "'history'"]) + "."


GRAMMAR_HELP = grammar_help()


def memory_key(text: str) -> str:
    """A stable key for `remember:` — the first words, plus a short hash against collisions."""
    words = re.findall(r"\w+", text.lower())[:4]
    digest = hashlib.sha256(text.encode()).hexdigest()[:6]
    return "-".join([*words, digest]) if words else digest


def parse(text: str) -> ToolCall | None:
    """The tool call a message asks for, or None for plain conversation."""
    message = text.strip()
    for pattern, tool, _ in _RULES:
        match = pattern.match(message)
        if match is None:
            continue
        g = match.groupdict()
        if tool == "memory_store":
            content = g["text"].strip()
            return ToolCall(tool, {"key": memory_key(content), "content": content})
        if tool == "memory_recall":
            return ToolCall(tool, {"query": g["query"].strip()})
        if tool == "memory_forget":
            return ToolCall(tool, {"key": g["key"]})
        if tool in ("send_message_to_peer", "delegate"):
            return ToolCall(tool, {"to": match.group(1).lower(), "text": g["text"].strip()})
        if tool == "file_read":
            return ToolCall(tool, {"path": g["path"]})
        if tool == "file_write":
            return ToolCall(tool, {"path": g["path"], "content": g["text"]})
        if tool == "file_list":
            return ToolCall(tool, {"path": g.get("path") or "."})
        return ToolCall(tool, {"command": g["command"].strip()})
    return None


def plain_answer(
    text: str,
    alias: str,
    identity: str = "",
    history: tuple[HistoryTurn, ...] = (),
    offered: Collection[str] | None = None,
) -> str:
    help_text = grammar_help(offered)
    lowered = text.strip().lower()
    if not lowered:
        return "Say something, or 'help'."
    if lowered in {"help", "?", "commands"}:
        return help_text
    if lowered == "history":
        said = [t.content for t in history if t.role == "user"][-5:]
        if not said:
            return "This session has no earlier messages."
        return "Earlier in this session you said:\n" + "\n".join(f"- {s}" for s in said)
    if re.match(r"^(hi|hello|hey)\b", lowered):
        return f"Hello, I am {alias}. {help_text}"
    if "who are you" in lowered:
        # The first line of prose in the identity files (their headings are skipped).
        lines = (ln.strip() for ln in identity.splitlines())
        return next((ln for ln in lines if ln and not ln.startswith("#")), f"I am {alias}.")
    return f"{alias} (offline) heard: {text.strip()}"


def first_step(
    text: str,
    alias: str,
    identity: str = "",
    history: tuple[HistoryTurn, ...] = (),
    offered: Collection[str] | None = None,
) -> Step:
    """`offered`: the tools of this turn, which `help` lists. A form of a tool outside them
    still becomes its call, as a model may call a tool it was not offered: the engine
    refuses it (`tool_not_granted`), which is what a peer asking for it must see."""
    call = parse(text)
    if call is not None:
        return Step(tool_calls=(call,))
    return Step(text=plain_answer(text, alias, identity, history, offered))


def reply(outcomes: list[ToolOutcome]) -> Step:
    """The final answer once the tools have run."""
    lines = []
    for o in outcomes:
        name = o.call.name
        if not o.ok:
            lines.append(f"{name} refused: {o.error_code}" + (f" ({o.detail})" if o.detail else ""))
        elif name == "memory_store":
            lines.append(f"Remembered as {o.call.args['key']}.")
        elif name == "memory_recall":
            lines.append(o.output or "I remember nothing about that.")
        elif name == "memory_forget":
            lines.append(
                "Forgotten." if o.data.get("forgotten") else "I had nothing under that key."
            )
        elif name in ("send_message_to_peer", "delegate"):
            lines.append(f"{o.call.args['to']} says: {o.output}")
        else:
            lines.append(o.output)
    return Step(text="\n".join(lines))


class OfflineProvider:
    """The provider interface over the grammar above."""

    name = "offline"

    async def complete(self, conversation: Conversation, on_delta: OnDelta) -> Step:
        if conversation.rounds:
            return reply(list(conversation.rounds[-1].outcomes))
        c = conversation
        return first_step(c.user, c.alias, c.system, c.history, {t.name for t in c.tools})

    async def aclose(self) -> None:
        return None
