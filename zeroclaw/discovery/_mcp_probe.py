"""The MCP metadata probe of an explicit stdio manifest (issue 26 §5, the seed's §4.4), as
pure parts and one thin run.

- `should_probe` decides what is started: an enabled, valid stdio `mcp_server` from a
  project manifest (mcp/ beside the config) whose program resolved. A server listed in a
  user directory, or in a Claude/Codex file, is shown, never started.
- `McpDialogue` is the conversation, sans-IO: bytes in (the server's stdout, as it comes),
  bytes out (what to write to its stdin). `initialize`, `notifications/initialized`,
  `tools/list` (paged), then `resources/list` and `prompts/list` when the server announced
  them. Lines are bounded; garbage, an error to `initialize` or too many pages end it.
- `merge_probe` folds how the probe ended into the item: health, diagnostics and the
  `McpMetadata` (tools with their schemas and pin digests, resources, prompts, the
  tool-schema hash that makes a cached scan stale).

The run (`probe_mcp`) goes through `_probe.run_probe`: the same sandbox, intermediate,
timeout and output cap as a `--version` probe; the scan's health checks run it under their
concurrency limit, so a server that hangs costs its own timeout and delays no other source.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import msgspec

from ..turns import tool_digest
from ._model import (
    Diagnostic,
    DiscoveredItem,
    DiscoveryErrorKind,
    Health,
    HealthStatus,
    McpMetadata,
    McpToolInfo,
)

PROTOCOL_VERSION = "2025-06-18"
MAX_GARBAGE = 16  # lines that are not JSON-RPC before the server is given up on
MAX_PAGES = 16  # of each list
MAX_NAMES = 256  # resources or prompts kept per server
DESCRIPTION_CHARS = 200
CLIENT_INFO = {"name": "zeroclaw-discovery", "version": "1"}


def should_probe(item: DiscoveredItem) -> bool:
    """Whether discovery may start this server for a metadata probe (pure)."""
    return (
        item.kind == "mcp_server"
        and item.source.kind == "project_manifest"
        and item.trust == "project"
        and item.enabled
        and not item.endpoint
        and bool(item.command)
        and not any(d.level == "error" for d in item.diagnostics)
    )


_LISTS = (("tools", "tools/list"), ("resources", "resources/list"), ("prompts", "prompts/list"))


@dataclass
class McpDialogue:
    """The probe's side of the conversation. Feed it what the server prints (`receive`);
    write what it returns. `done` once every list is in, `failure` when it gave up."""

    max_line: int = 1024 * 1024
    done: bool = False
    failure: str = ""
    initialized: bool = False
    server: str = ""
    protocol: str = ""
    tools: list[dict[str, object]] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _buffer: bytearray = field(default_factory=bytearray)
    _garbage: int = 0
    _next_id: int = 1
    _waiting: tuple[int, str] | None = None  # (request id, method)
    _todo: list[str] = field(default_factory=list)  # the list methods still to ask
    _pages: int = 0

    @property
    def finished(self) -> bool:
        return self.done or bool(self.failure)

    def opening(self) -> bytes:
        return self._request(
            "initialize",
            {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
        )

    def receive(self, chunk: bytes) -> bytes:
        out = bytearray()
        self._buffer += chunk
        while not self.finished and (end := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            if line.strip():
                out += self._line(line)
        if not self.finished and len(self._buffer) > self.max_line:
            self.failure = f"a line over {self.max_line} bytes on its stdout"
        return bytes(out)

    # --- one message -------------------------------------------------------------------

    def _line(self, line: bytes) -> bytes:
        try:
            message: object = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            message = None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self._garbage += 1
            if self._garbage > MAX_GARBAGE:
                self.failure = f"more than {MAX_GARBAGE} lines that are not JSON-RPC"
            return b""
        if "method" in message:
            if "id" in message:  # a request of the server's (ping, roots/list): answered
                if message["method"] == "ping":
                    return _encode({"jsonrpc": "2.0", "id": message["id"], "result": {}})
                return _encode(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "error": {"code": -32601, "message": "not offered by a probe"},
                    }
                )
            return b""  # a notification: nothing to say
        if self._waiting is None or message.get("id") != self._waiting[0]:
            return b""
        method = self._waiting[1]
        self._waiting = None
        error = message.get("error")
        result = message.get("result")
        if error is not None or not isinstance(result, dict):
            detail = error.get("message", "") if isinstance(error, dict) else "no result"
            if method == "initialize":
                self.failure = f"initialize refused: {str(detail)[:200]}"
                return b""
            self.notes.append(f"{method} refused: {str(detail)[:200]}")
            return self._next()
        if method == "initialize":
            return self._initialized(result)
        return self._listed(method, result)

    def _initialized(self, result: dict[str, object]) -> bytes:
        self.initialized = True
        info = result.get("serverInfo")
        if isinstance(info, dict):
            name, version = info.get("name"), info.get("version")
            self.server = " ".join(str(v)[:64] for v in (name, version) if isinstance(v, str))
        version = result.get("protocolVersion")
        self.protocol = str(version)[:32] if isinstance(version, str) else ""
        offered = result.get("capabilities")
        offered = offered if isinstance(offered, dict) else {}
        self._todo = [method for key, method in _LISTS if key in offered]
        note = _encode({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return note + self._next()

    def _listed(self, method: str, result: dict[str, object]) -> bytes:
        key = method.split("/")[0]
        entries = result.get(key)
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            if key == "tools":
                self.tools.append(entry)
            else:
                target = self.resources if key == "resources" else self.prompts
                name = entry.get("uri") if key == "resources" else entry.get("name")
                name = name if isinstance(name, str) else entry.get("name")
                if isinstance(name, str) and len(target) < MAX_NAMES:
                    target.append(name[:256])
        cursor = result.get("nextCursor")
        self._pages += 1
        if isinstance(cursor, str) and cursor:
            if self._pages < MAX_PAGES:
                return self._request(method, {"cursor": cursor})
            self.notes.append(f"{method}: more than {MAX_PAGES} pages, the rest not read")
        self._pages = 0
        self._todo.remove(method)
        return self._next()

    def _next(self) -> bytes:
        if not self._todo:
            self.done = True
            return b""
        return self._request(self._todo[0], {})

    def _request(self, method: str, params: dict[str, object]) -> bytes:
        ident = self._next_id
        self._next_id += 1
        self._waiting = (ident, method)
        return _encode({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})


def _encode(message: dict[str, object]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


# --- what the probe found, folded into the item --------------------------------------------


def tools_hash(tools: tuple[McpToolInfo, ...]) -> str:
    """One digest over every tool's pin digest, by name: equal iff no tool's name,
    description or input schema changed and none came or went."""
    joined = "\n".join(f"{t.name}\0{t.digest}" for t in sorted(tools, key=lambda t: t.name))
    return hashlib.sha256(joined.encode()).hexdigest()


def _tool(entry: dict[str, object], allowed: tuple[str, ...]) -> McpToolInfo | None:
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        return None
    description = entry.get("description")
    description = description if isinstance(description, str) else ""
    schema = entry.get("inputSchema")
    schema = schema if isinstance(schema, dict) else {}
    annotations = entry.get("annotations")
    read_only = isinstance(annotations, dict) and annotations.get("readOnlyHint") is True
    return McpToolInfo(
        name=name[:128],
        digest=tool_digest(name, description, schema),
        description=description[:DESCRIPTION_CHARS],
        input_schema={str(k): v for k, v in schema.items()},
        read_only=read_only,
        allowed=name in allowed,
    )


def metadata(dialogue: McpDialogue, allowed: tuple[str, ...]) -> McpMetadata:
    tools = tuple(t for t in (_tool(e, allowed) for e in dialogue.tools) if t is not None)
    return McpMetadata(
        server=dialogue.server,
        protocol=dialogue.protocol,
        tools=tools,
        resources=tuple(dialogue.resources),
        prompts=tuple(dialogue.prompts),
        tools_hash=tools_hash(tools),
    )


@dataclass(frozen=True)
class McpProbeEnd:
    """How the run ended, for `merge_probe`: the intermediate's status word (`_probe`),
    whether the output cap was reached, or why it never started."""

    status: str = ""
    truncated: bool = False
    cannot_start: str = ""


def merge_probe(
    item: DiscoveredItem,
    dialogue: McpDialogue,
    end: McpProbeEnd,
    *,
    now: float,
    timeout_secs: float,
    output_cap: int,
) -> DiscoveredItem:
    """The item with what its metadata probe found (pure)."""

    def failed(status: HealthStatus, kind: DiscoveryErrorKind, message: str) -> DiscoveredItem:
        return _with(
            item,
            Health(status, now, message=message[:200]),
            Diagnostic("error", kind, f"{item.id}: MCP metadata probe: {message}"[:400]),
        )

    if end.cannot_start:
        return failed("unavailable", "health_check_failed", f"could not start: {end.cannot_start}")
    if not dialogue.done:
        word, _, why = end.status.partition(" ")
        if word == "exec_refused":
            return failed("permission_denied", "permission_denied", f"could not run ({why})")
        if word == "exec_failed":
            return failed("unavailable", "health_check_failed", f"could not run ({why})")
        if dialogue.failure:
            return failed("unavailable", "health_check_failed", dialogue.failure)
        if end.truncated:
            return failed(
                "unavailable",
                "output_too_large",
                f"printed more than {output_cap} bytes (max_command_output_bytes) "
                "before its lists were in",
            )
        if word in ("timeout", "stopped"):
            stage = "its lists" if dialogue.initialized else "initialize"
            return failed(
                "unavailable",
                "command_timeout",
                f"no answer to {stage} within {timeout_secs * 1000:.0f} ms",
            )
        stage = "answering its lists" if dialogue.initialized else "answering initialize"
        return failed("unavailable", "health_check_failed", f"{end.status} before {stage}")
    allowed = item.allowlists.get("tools", ())
    found = metadata(dialogue, allowed)
    notes: list[Diagnostic] = [
        Diagnostic("warning", "health_check_failed", f"{item.id}: {note}")
        for note in dialogue.notes
    ]
    offered = {t.name for t in found.tools}
    missing = [name for name in allowed if name not in offered]
    if missing:
        notes.append(
            Diagnostic(
                "warning",
                "capability_unknown",
                f"{item.id}: the tools allowlist names {', '.join(missing)[:200]}, "
                "which the server does not offer",
            )
        )
    hidden = len(offered) - len(offered & set(allowed))
    if hidden:
        notes.append(
            Diagnostic(
                "info",
                "policy_denied",
                f"{item.id}: {hidden} tool{'s' if hidden != 1 else ''} of the server not in "
                "the tools allowlist: never exposed",
            )
        )
    version = found.server or f"{len(found.tools)} tools"
    probed = _with(item, Health("available", now, version=version[:80]), *notes)
    return msgspec.structs.replace(probed, mcp=found)


def _with(item: DiscoveredItem, health: Health, *notes: Diagnostic) -> DiscoveredItem:
    return msgspec.structs.replace(item, health=health, diagnostics=(*item.diagnostics, *notes))
