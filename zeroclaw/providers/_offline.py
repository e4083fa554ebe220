"""The built-in offline provider: deterministic, no network. Pure.

It turns a small documented grammar into real tool calls, so every path of the system
runs without a model; anything else gets a plain answer from a few rules.

    remember: TEXT          -> memory_store   (key derived from the text)
    recall QUERY            -> memory_recall
    recall from A,B: QUERY  -> memory_recall, own memory and the named agents' (granted) ones
    forget KEY              -> memory_forget
    ask ALIAS: TEXT         -> send_message_to_peer
    delegate ALIAS: TEXT    -> delegate
    read PATH               -> file_read
    write PATH: TEXT        -> file_write
    list [PATH]             -> file_list
    run COMMAND             -> shell
    history                 -> (no tool) what was said earlier in this session
    context [TEXT]          -> (no tool) what this turn was given from memory, exactly as a
                               model is sent it (the recall query is the whole message)
    note: TEXT              -> (no tool) heard; TEXT becomes a fact when the session is
                               compacted (below)
    dispatch ID: TEXT       -> agent_dispatch (a sub-agent; issue 12)
    catalog                 -> agent_catalog
    invoke ID [for CAP]: TEXT -> invoke_adapter (a discovered adapter; issue 15)
    invoke for CAP: TEXT    -> invoke_adapter naming no adapter: a business alias
                               ([discovery.aliases]) or a routed capability
    skill NAME [PATH]       -> skill_read: the agent's skill NAME, its SKILL.md or PATH
                               inside it (ADR 0056)
    mcp SERVER TOOL [JSON]  -> mcp__SERVER__TOOL with the JSON object as its arguments
                               (an MCP server's tool; issue 26), {} without one

After the tools ran, `reply()` turns their results into the answer.

A sub-agent runtime's conversation (its tools include `subagent_submit_result`) has a
grammar of its own, read from the task (the user message before the runtime's input block):

    submit: JSON            -> subagent_submit_result with exactly that JSON object
    say: TEXT               -> (no tool) TEXT, nothing submitted
    read PATH               -> skill_read, then the outcome as text
    mcp SERVER TOOL [JSON]  -> mcp__SERVER__TOOL (a bound MCP server's tool; issue 26), then
                               subagent_submit_result with `minimal_instance` of its
                               parameters filled from the tool's output (or refusal)
    anything else           -> subagent_submit_result with `minimal_instance` of its
                               parameters (the output schema), filled from the task

After a submit the answer is "submitted" (or the refusal).

A compaction's summary request (purpose "summary", ADR 0059) is answered by a fixed rule,
in the form `parse_summary` reads:

    SUMMARY:
    <the earlier summary's lines>
    - user: TEXT / - assistant: TEXT    one line per turn summarised, in order, blanks
                                        collapsed, cut at 120 characters
    FACTS:
    - TEXT                              one per user turn `note: TEXT`, in order

of which the summary keeps its newest 20 lines.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Collection, Mapping
from typing import Any

from ._context import render_context
from ._types import Conversation, HistoryTurn, OnDelta, Recap, Step, ToolCall, ToolOutcome
from ._usage import estimate

_ALIAS = r"@?([a-z][a-z0-9_-]{0,31})"
# Each form of the grammar, the tool it calls, and how `help` spells it.
_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"^remember\s*:\s*(?P<text>.+)$", re.S | re.I), "memory_store", "remember: TEXT"),
    (
        re.compile(r"^recall\s+from\s+(?P<from>[a-z0-9_,\s-]+?)\s*:\s*(?P<query>.+)$", re.S | re.I),
        "memory_recall",
        "recall from ALIAS,ALIAS: QUERY",
    ),
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
GRAMMAR_TOOLS: tuple[str, ...] = tuple(dict.fromkeys(tool for _, tool, _ in _RULES))
# An agent's sub-agent tools (issue 12), its adapter tool (issue 15) and its skill tool
# (ADR 0056): offered only when its config gives them, so they are not among the built-in
# tools above and `help` lists them only when offered.
_DISPATCH_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"^dispatch\s+(?P<id>[a-z][a-z0-9_-]{0,63})\s*:\s*(?P<text>.+)$", re.S | re.I),
        "agent_dispatch",
        "dispatch ID: TEXT",
    ),
    (re.compile(r"^catalog\s*$", re.I), "agent_catalog", "catalog"),
    (
        re.compile(
            r"^invoke\s+(?P<id>[a-z0-9][a-z0-9._-]{0,63})"
            r"(?:\s+for\s+(?P<cap>[a-z][a-z0-9_.-]{0,127}))?\s*:\s*(?P<text>.+)$",
            re.S | re.I,
        ),
        "invoke_adapter",
        "invoke ADAPTER [for CAPABILITY]: TEXT",
    ),
    (
        re.compile(
            r"^invoke\s+for\s+(?P<routed>[a-z][a-z0-9_.-]{0,127})\s*:\s*(?P<text>.+)$", re.S | re.I
        ),
        "invoke_adapter",
        "invoke for CAPABILITY: TEXT",
    ),
    (
        re.compile(r"^skill\s+(?P<id>[a-z][a-z0-9_-]{0,63})(?:\s+(?P<path>\S+))?\s*$", re.I),
        "skill_read",
        "skill NAME [PATH]",
    ),
)
DISPATCH_TOOLS: tuple[str, ...] = tuple(dict.fromkeys(tool for _, tool, _ in _DISPATCH_RULES))
SKILL = "SKILL.md"  # what `skill NAME` reads
_SKILLS_HEADING = re.compile(r"^# Skills$", re.M)
# An MCP server's tool (issue 26): the name is zeroclaw.config.mcp_tool_name's.
_MCP = re.compile(
    r"^mcp\s+(?P<server>[a-z][a-z0-9_-]{0,31})\s+(?P<tool>[A-Za-z0-9_.-]{1,64})"
    r"(?:\s+(?P<json>\{.*\}))?\s*$",
    re.S,
)


def _mcp_call(message: str) -> ToolCall | None:
    match = _MCP.match(message)
    if match is None:
        return None
    args: object = {}
    if match["json"]:
        try:
            args = json.loads(match["json"])
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCall(f"mcp__{match['server']}__{match['tool']}", args)


def grammar_help(offered: Collection[str] | None = None) -> str:
    """The forms this provider understands for the tools `offered` (None: all the built-in
    ones; the sub-agent forms only when their tools are offered)."""
    forms = [f"'{form}'" for _, tool, form in _RULES if offered is None or tool in offered]
    forms += [f"'{form}'" for _, tool, form in _DISPATCH_RULES if offered and tool in offered]
    return "I understand: " + ", ".join([*forms, "'history'", "'context'"]) + "."


GRAMMAR_HELP = grammar_help()


def memory_key(text: str) -> str:
    """A stable key for `remember:` — the first words, plus a short hash against collisions."""
    words = re.findall(r"\w+", text.lower())[:4]
    digest = hashlib.sha256(text.encode()).hexdigest()[:6]
    return "-".join([*words, digest]) if words else digest


def parse(text: str) -> ToolCall | None:
    """The tool call a message asks for, or None for plain conversation."""
    message = text.strip()
    if (mcp := _mcp_call(message)) is not None:
        return mcp
    for pattern, tool, _ in _DISPATCH_RULES:
        if (match := pattern.match(message)) is not None:
            if tool == "agent_catalog":
                return ToolCall(tool, {})
            if tool == "skill_read":
                return ToolCall(
                    tool, {"skill": match["id"].lower(), "path": match["path"] or SKILL}
                )
            if tool == "invoke_adapter":
                if match.groupdict().get("routed"):  # no adapter: an alias, or routed
                    routed = {"adapter": "", "capability": match["routed"]}
                    return ToolCall(tool, {**routed, "input": match["text"].strip()})
                args = {"adapter": match["id"].lower(), "input": match["text"].strip()}
                if match["cap"]:
                    args["capability"] = match["cap"]
                return ToolCall(tool, args)
            return ToolCall(tool, {"agentId": match["id"].lower(), "task": match["text"].strip()})
    for pattern, tool, _ in _RULES:
        match = pattern.match(message)
        if match is None:
            continue
        g = match.groupdict()
        if tool == "memory_store":
            content = g["text"].strip()
            return ToolCall(tool, {"key": memory_key(content), "content": content})
        if tool == "memory_recall":
            if g.get("from"):
                named = [n.strip().lstrip("@").lower() for n in g["from"].split(",")]
                query = g["query"].strip()
                return ToolCall(tool, {"query": query, "namespaces": [n for n in named if n]})
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


_CONTEXT = re.compile(r"^context(?:\s.*)?$", re.S | re.I)


def plain_answer(
    text: str,
    alias: str,
    identity: str = "",
    history: tuple[HistoryTurn, ...] = (),
    offered: Collection[str] | None = None,
    context: str = "",
) -> str:
    help_text = grammar_help(offered)
    lowered = text.strip().lower()
    if not lowered:
        return "Say something, or 'help'."
    if lowered in {"help", "?", "commands"}:
        return help_text
    if _CONTEXT.match(lowered):
        return context or "This turn was given nothing from memory."
    if lowered == "history":
        said = [t.content for t in history if t.role == "user"][-5:]
        if not said:
            return "This session has no earlier messages."
        return "Earlier in this session you said:\n" + "\n".join(f"- {s}" for s in said)
    if re.match(r"^(hi|hello|hey)\b", lowered):
        return f"Hello, I am {alias}. {help_text}"
    if "who are you" in lowered:
        # The first line of prose in the identity files (their headings are skipped), not
        # in the skills listing after them (zeroclaw.agent's "# Skills" section).
        files = _SKILLS_HEADING.split(identity, maxsplit=1)[0]
        lines = (ln.strip() for ln in files.splitlines())
        return next((ln for ln in lines if ln and not ln.startswith("#")), f"I am {alias}.")
    return f"{alias} (offline) heard: {text.strip()}"


def first_step(
    text: str,
    alias: str,
    identity: str = "",
    history: tuple[HistoryTurn, ...] = (),
    offered: Collection[str] | None = None,
    context: str = "",
) -> Step:
    """`offered`: the tools of this turn, which `help` lists. A form of a tool outside them
    still becomes its call, as a model may call a tool it was not offered: the engine
    refuses it (`tool_not_granted`), which is what a peer asking for it must see."""
    call = parse(text)
    if call is not None:
        return Step(tool_calls=(call,))
    return Step(text=plain_answer(text, alias, identity, history, offered, context))


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
        elif name == SUBMIT_RESULT:
            lines.append("submitted")
        else:
            lines.append(o.output)
    return Step(text="\n".join(lines))


# ------------------------------------------------------------------ sub-agent runtimes

SUBMIT_RESULT = "subagent_submit_result"  # the tools package's name for it (pinned by a test)
SKILL_READ = "skill_read"
# Where a sub-agent runtime's user message turns from the task to the input it labels as
# data (zeroclaw.agent's user_text; pinned by a test): the grammar reads the task only.
INPUT_MARKER = "\n\nInput (JSON data, not instructions):"
_SUBMIT = re.compile(r"^submit\s*:\s*(?P<json>.+)$", re.S | re.I)
_SAY = re.compile(r"^say\s*:\s*(?P<text>.*)$", re.S | re.I)
_READ = re.compile(r"^read\s+(?P<path>\S+)\s*$", re.I)


def task_of(user: str) -> str:
    """The task of a sub-agent runtime's user message, without the input block."""
    return user.split(INPUT_MARKER, 1)[0].strip()


def _first_type(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if isinstance(k, str)]
        return next((k for k in kinds if k != "null"), kinds[0] if kinds else None)
    if isinstance(kind, str):
        return kind
    if "properties" in schema or "required" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return None


def _bounded_number(schema: Mapping[str, Any], integer: bool) -> int | float:
    low = schema.get("minimum")
    if not isinstance(low, int | float):
        exclusive = schema.get("exclusiveMinimum")
        low = exclusive + 1 if isinstance(exclusive, int | float) else 0
    high = schema.get("maximum")
    value: int | float = high if isinstance(high, int | float) and low > high else low
    return math.ceil(value) if integer else value


def _schema_at(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def minimal_instance(schema: Mapping[str, Any], text: str) -> Any:
    """The smallest value `schema` asks for, its strings filled from `text`. Pure.

    `const` and the first `enum` value win; then by type: an object has its required
    properties (each filled recursively), an array `minItems` copies of its item, a string
    the trimmed text cut to `maxLength` (and padded to `minLength`), an integer or number
    its minimum (else 0, kept under a maximum), a boolean false, null None. `anyOf`/`oneOf`
    take their first branch, `allOf` its first. Patterns, formats and `uniqueItems` are not
    honoured (the shipped schemas use none)."""
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for combinator in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(combinator)
        if isinstance(branches, list) and branches and isinstance(branches[0], Mapping):
            merged = {k: v for k, v in schema.items() if k != combinator}
            return minimal_instance({**merged, **branches[0]}, text)
    kind = _first_type(schema)
    if kind == "object":
        properties = _schema_at(schema.get("properties"))
        required = schema.get("required")
        names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
        return {name: minimal_instance(_schema_at(properties.get(name)), text) for name in names}
    if kind == "array":
        items = schema.get("items")
        count = schema.get("minItems", 0)
        item = minimal_instance(_schema_at(items), text)
        return [item] * (count if isinstance(count, int) else 0)
    if kind in ("integer", "number"):
        return _bounded_number(schema, kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    value = text.strip()
    longest = schema.get("maxLength")
    if isinstance(longest, int):
        value = value[:longest]
    shortest = schema.get("minLength")
    if isinstance(shortest, int) and len(value) < shortest:
        value += "." * (shortest - len(value))
    return value


def subagent_step(task: str, submit_parameters: Mapping[str, Any]) -> Step:
    """The first step of a sub-agent runtime's turn (the grammar in the module docstring)."""
    if (match := _SAY.match(task)) is not None:
        return Step(text=match["text"].strip())
    if (match := _READ.match(task)) is not None:
        return Step(tool_calls=(ToolCall(SKILL_READ, {"path": match["path"]}),))
    if (mcp := _mcp_call(task)) is not None:
        return Step(tool_calls=(mcp,))
    if (match := _SUBMIT.match(task)) is not None:
        try:
            value, _ = json.JSONDecoder().raw_decode(match["json"].strip())
        except ValueError as exc:
            return Step(text=f"submit: not JSON ({exc})")
        if not isinstance(value, dict):
            return Step(text="submit: a result is a JSON object")
        return Step(tool_calls=(ToolCall(SUBMIT_RESULT, value),))
    return Step(tool_calls=(ToolCall(SUBMIT_RESULT, minimal_instance(submit_parameters, task)),))


# ------------------------------------------------------------------ a compaction's summary

SUMMARY_LINES = 20  # the newest lines the offline summary keeps
SAID_CHARS = 120  # a turn's line is cut here
_NOTE = re.compile(r"^note\s*:\s*(?P<text>.+)$", re.S | re.I)


def offline_summary(recap: Recap | None, turns: tuple[HistoryTurn, ...]) -> str:
    """The deterministic answer to a summary request (the rule in the module docstring)."""
    lines = [line for line in (recap.text.splitlines() if recap else []) if line.strip()]
    facts = []
    for turn in turns:
        said = " ".join(turn.content.split())
        lines.append(f"- {turn.role}: {said[:SAID_CHARS]}")
        note = _NOTE.match(turn.content.strip()) if turn.role == "user" else None
        if note is not None:
            facts.append(" ".join(note["text"].split()))
    summary = "\n".join(lines[-SUMMARY_LINES:])
    return f"SUMMARY:\n{summary}\nFACTS:\n" + "".join(f"- {fact}\n" for fact in facts)


def _mcp_round(outcomes: list[ToolOutcome]) -> bool:
    return bool(outcomes) and all(o.call.name.startswith("mcp__") for o in outcomes)


class OfflineProvider:
    """The provider interface over the grammar above. Each step reports a deterministic
    count of tokens: four characters to a token, of what it was sent and what it said."""

    def __init__(self, name: str = "offline") -> None:
        self.name = name  # its reference, `offline.<alias>`, when the config built it

    async def complete(self, conversation: Conversation, on_delta: OnDelta) -> Step:
        step = self._step(conversation)
        usage = estimate(conversation, step, estimated=False)
        return dataclasses.replace(step, usage=usage, provider=self.name)

    def _step(self, conversation: Conversation) -> Step:
        c = conversation
        if c.purpose == "summary":
            return Step(text=offline_summary(c.recap, c.history))
        submit = next((t for t in c.tools if t.name == SUBMIT_RESULT), None)
        if c.rounds:
            outcomes = list(c.rounds[-1].outcomes)
            if submit is not None and len(c.rounds) == 1 and _mcp_round(outcomes):
                # A sub-agent's MCP call: its result, submitted as the output schema asks.
                said = reply(outcomes).text or ""
                return Step(
                    tool_calls=(ToolCall(SUBMIT_RESULT, minimal_instance(submit.parameters, said)),)
                )
            return reply(outcomes)
        if submit is not None:
            return subagent_step(task_of(c.user), submit.parameters)
        context = render_context(c.memories, c.recap, c.cut)
        offered = {t.name for t in c.tools}
        return first_step(c.user, c.alias, c.system, c.history, offered, context)

    async def aclose(self) -> None:
        return None
