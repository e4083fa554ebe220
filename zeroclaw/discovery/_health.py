"""The only things discovery ever runs: an allowlisted program with `--version`, an
explicit manifest's stdio MCP server for a metadata probe (`_mcp_probe`), and one bounded
GET of a loopback model server's model list.

A probe runs under the command sandbox with a scrubbed environment (PATH, C locale, an
empty private HOME it cannot write), the scan's timeout and output cap, and everything it
starts ends with it (`_probe`, ADR 0047); of its output only a version-looking token is
kept (`_redact.version_token`). No prompt, no network request of its own making.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from .._process import CannotStart
from ..config import daemon_paths
from ..policy import abi_version, build_ruleset, cap_last_cap, decide_confinement
from ._context import ScanContext
from ._mcp_probe import McpDialogue, McpProbeEnd, merge_probe, should_probe
from ._model import Diagnostic, DiscoveredItem, Health, HealthStatus, Source
from ._probe import ProbeOutcome, probe_plan, run_probe
from ._redact import probe_message, redact_text, version_token

if TYPE_CHECKING:
    import httpx  # loaded by the one probe that needs it: the daemon starts without it

SUMMARY_CHARS = 200
MODEL_PORTS: tuple[tuple[str, int, str], ...] = (
    ("ollama", 11434, "/api/tags"),
    ("llama.cpp", 8080, "/v1/models"),
    ("vllm", 8000, "/v1/models"),
    ("lm-studio", 1234, "/v1/models"),
)


def _summary(text: str) -> str:
    return probe_message(text)


def _probe_env(ctx: ScanContext, home: str) -> dict[str, str]:
    """PATH, the C locale and one empty private directory for every per-user location."""
    env = {"PATH": ctx.env.get("PATH", ""), "LANG": "C.UTF-8", "LC_ALL": "C"}
    env.update(
        dict.fromkeys(
            ("HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"), home
        )
    )
    return env


def _excluded(ctx: ScanContext) -> tuple[str, ...]:
    """What a probe never reads beyond PROBE_FORBIDDEN: the daemon's own state and the
    operator's secrets in their home."""
    paths = daemon_paths(ctx.config, ctx.env)
    excluded = [str(paths.state_dir), str(paths.runtime_dir)]
    if ctx.home is not None:
        excluded.extend(str(ctx.home / name) for name in (".ssh", ".gnupg", ".aws", ".config"))
    return tuple(excluded)


async def probe_version(item: DiscoveredItem, ctx: ScanContext) -> DiscoveredItem:
    """`<command> --version`, confined and bounded (`_probe`); the item with its health and
    the version the probe printed (only a version-looking token of it is kept)."""
    now = ctx.now
    limits = ctx.limits
    confined = abi_version() >= 1
    try:
        outcome = await _run_confined(
            ctx, [item.command, "--version"], timeout_secs=limits.command_check_timeout
        )
    except CannotStart as exc:
        return _with(
            item,
            Health("unavailable", now, message=_summary(exc.detail)),
            Diagnostic(
                "error",
                "health_check_failed",
                f"{item.program} --version could not run: {_summary(exc.detail)}",
            ),
        )
    unconfined = () if confined else (_UNCONFINED,)
    word, _, why = outcome.status.partition(" ")
    if word in ("exec_refused", "exec_failed"):
        status: HealthStatus = "permission_denied" if word == "exec_refused" else "unavailable"
        return _with(
            item,
            Health(status, now, message=f"--version could not run: {_summary(why)}"),
            Diagnostic(
                "error",
                "permission_denied" if status == "permission_denied" else "health_check_failed",
                f"{item.program} --version could not run ({_summary(why)}): the probe runs "
                "only the program, its interpreter and their loaders",
            ),
            *unconfined,
        )
    if outcome.timed_out:
        return _with(
            item,
            Health("unavailable", now, message="--version timed out"),
            Diagnostic(
                "error",
                "command_timeout",
                f"{item.program} --version did not finish within "
                f"{limits.command_check_timeout * 1000:.0f} ms (command_check_timeout_ms)",
            ),
            *unconfined,
        )
    version = version_token(outcome.output)
    if outcome.exit_code != 0:
        ended = (
            f"exited {outcome.exit_code}"
            if outcome.exit_code is not None
            else f"was killed ({_summary(outcome.status)})"
        )
        return _with(
            item,
            Health("unavailable", now, version, f"--version {ended}"),
            Diagnostic("error", "health_check_failed", f"{item.program} --version {ended}"),
            *unconfined,
        )
    if outcome.truncated:
        return _with(
            item,
            Health("degraded", now, version, "--version printed too much"),
            Diagnostic(
                "warning",
                "output_too_large",
                f"{item.program} --version printed more than {limits.max_command_output_bytes} "
                "bytes (max_command_output_bytes); only a version is kept",
            ),
            *unconfined,
        )
    return _with(item, Health("available", now, version), *unconfined)


_UNCONFINED = Diagnostic(
    "warning",
    "policy_denied",
    "this kernel has no Landlock: the --version probe ran without its file sandbox",
)


async def _run_confined(
    ctx: ScanContext,
    argv: list[str],
    *,
    timeout_secs: float,
    dialogue: McpDialogue | None = None,
) -> ProbeOutcome:
    """`argv` under the probe sandbox (where the kernel has Landlock), bounded by the scan's
    output cap, in a private home of its own that is gone after. CannotStart as
    `run_probe` raises it."""
    with tempfile.TemporaryDirectory(prefix="zeroclaw-probe-") as home:
        os.chmod(home, 0o700)
        path = ctx.env.get("PATH", "")
        return await run_probe(
            argv,
            timeout_secs=timeout_secs,
            env=_probe_env(ctx, home),
            cwd=home,
            output_cap=ctx.limits.max_command_output_bytes,
            ruleset=functools.partial(_ruleset, argv[0], path, home, _excluded(ctx))
            if abi_version() >= 1
            else None,
            dialogue=dialogue,
        )


def _ruleset(program: str, path: str, home: str, excluded: tuple[str, ...]) -> int:
    # A probe may connect nowhere and bind nothing (TCP rules from Landlock ABI 4, ADR 0043).
    confinement = decide_confinement("probe", abi_version(), cap_last_cap=cap_last_cap())
    return build_ruleset(probe_plan(program, path, home, excluded), confinement)


def _with(item: DiscoveredItem, health: Health, *notes: Diagnostic) -> DiscoveredItem:
    return msgspec.structs.replace(item, health=health, diagnostics=(*item.diagnostics, *notes))


def mcp_timeout(item: DiscoveredItem, ctx: ScanContext) -> float:
    """A metadata probe's bound: the manifest's `timeout_ms`, else the scan's
    command_check_timeout_ms, never past the global scan timeout."""
    wanted = item.timeout_ms / 1000 if item.timeout_ms else ctx.limits.command_check_timeout
    return min(wanted, ctx.limits.global_timeout)


async def probe_mcp(item: DiscoveredItem, ctx: ScanContext) -> DiscoveredItem:
    """Start an explicit manifest's stdio MCP server under the probe sandbox, ask it for
    its metadata (`_mcp_probe.McpDialogue`), stop it; the item with what it learnt. Its
    arguments are the manifest's; its environment the probe's (the variables the manifest
    names are not passed: a metadata probe needs no credential)."""
    limits = ctx.limits
    timeout = mcp_timeout(item, ctx)
    confined = abi_version() >= 1
    dialogue = McpDialogue(max_line=limits.max_command_output_bytes)
    end: McpProbeEnd
    try:
        outcome = await _run_confined(
            ctx, [item.command, *item.args], timeout_secs=timeout, dialogue=dialogue
        )
        end = McpProbeEnd(outcome.status, outcome.truncated)
    except CannotStart as exc:
        end = McpProbeEnd(cannot_start=_summary(exc.detail))
    merged = merge_probe(
        item,
        dialogue,
        end,
        now=ctx.now,
        timeout_secs=timeout,
        output_cap=limits.max_command_output_bytes,
    )
    return merged if confined else _with(merged, merged.health, _UNCONFINED)


MAX_CONCURRENT_HEALTH_CHECKS = 4


async def check_health(items: list[DiscoveredItem], ctx: ScanContext) -> None:
    """Probe, in place, every item that has a program to probe: each CLI program once (many
    adapters may run the same one), each explicit stdio MCP server once, four at a time.
    Every probe has its own timeout: one that hangs holds one slot for that long, never
    the scan's other sources."""
    by_command: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        if item.kind == "cli_adapter" and item.command:
            by_command.setdefault(item.command, []).append(index)
    servers = [index for index, item in enumerate(items) if should_probe(item)]
    limiter = trio.CapacityLimiter(MAX_CONCURRENT_HEALTH_CHECKS)

    async def one(indices: list[int]) -> None:
        async with limiter:
            probed = await probe_version(items[indices[0]], ctx)
        added = probed.diagnostics[len(items[indices[0]].diagnostics) :]
        for index in indices:
            items[index] = _with(items[index], probed.health, *added)

    async def server(index: int) -> None:
        async with limiter:
            items[index] = await probe_mcp(items[index], ctx)

    async with trio.open_nursery() as nursery:
        for indices in by_command.values():
            nursery.start_soon(one, indices)
        for index in servers:
            nursery.start_soon(server, index)


# --- loopback model servers ----------------------------------------------------------------


def _host(url: str) -> str:
    """host[:port] of `url`, never its userinfo, path or query."""
    rest = url.split("://", 1)[-1]
    for mark in "/?#":
        rest = rest.split(mark, 1)[0]
    return rest.rsplit("@", 1)[-1]


def model_targets(ctx: ScanContext) -> list[tuple[str, str, bool]]:
    """(name, URL of the model list, configured?) for every server to probe."""
    targets: list[tuple[str, str, bool]] = []
    if ctx.settings.probe_model_ports:
        targets.extend(
            (name, f"http://127.0.0.1:{port}{path}", False) for name, port, path in MODEL_PORTS
        )
    for url in ctx.settings.model_servers:
        base = url.rstrip("/")
        path = "" if base.endswith(("/models", "/api/tags")) else "/v1/models"
        if base.endswith("/v1"):
            path = "/models"
        targets.append((_host(base), base + path, True))
    return targets


async def scan_model_servers(ctx: ScanContext) -> list[DiscoveredItem]:
    # The usual ports with nothing listening (the common case) refuse a plain connect: only
    # a server that may be there is asked over HTTP, so the daemon's scan loads no HTTP
    # client without one (ADR 0067). A configured server is always asked: why it is not
    # there is reported.
    candidates = model_targets(ctx)
    listening = [configured for _, _, configured in candidates]
    with trio.move_on_after(ctx.limits.command_check_timeout):
        async with trio.open_nursery() as nursery:
            for index, (_, url, configured) in enumerate(candidates):
                if not configured:
                    nursery.start_soon(_accepts, url, listening, index)
    targets = [target for target, up in zip(candidates, listening, strict=True) if up]
    if not targets:
        return []
    import httpx

    found: list[DiscoveredItem | None] = [None] * len(targets)
    timeout = httpx.Timeout(ctx.limits.command_check_timeout)
    async with (
        httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as client,
        trio.open_nursery() as nursery,
    ):
        for index, target in enumerate(targets):
            nursery.start_soon(_probe_server, client, ctx, target, found, index)
    return [item for item in found if item is not None]


async def _accepts(url: str, listening: list[bool], index: int) -> None:
    """Whether something accepts a TCP connection at `url`'s loopback host and port."""
    host, _, port = _host(url).rpartition(":")
    with contextlib.suppress(OSError):
        stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
        await stream.aclose()
        listening[index] = True


async def _probe_server(
    client: httpx.AsyncClient,
    ctx: ScanContext,
    target: tuple[str, str, bool],
    found: list[DiscoveredItem | None],
    index: int,
) -> None:
    name, url, configured = target
    host = _host(url)
    source = Source("config" if configured else "system", "model_servers", url, url)
    ident = f"{name}@{host}" if not configured else host
    cap = ctx.limits.max_command_output_bytes
    import httpx

    try:
        with trio.fail_after(ctx.limits.command_check_timeout):
            async with client.stream("GET", url) as response:
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > cap:
                        break
                status = response.status_code
    except (httpx.HTTPError, OSError, trio.TooSlowError) as exc:
        if configured:  # the operator asked for this one: say why it is not there
            found[index] = DiscoveredItem(
                kind="local_model",
                id=ident,
                source=source,
                trust="project",
                endpoint=url,
                health=Health(
                    "unavailable", ctx.now, message=_summary(str(exc) or type(exc).__name__)
                ),
            )
        return
    models, note = _models(body, status, cap)
    found[index] = DiscoveredItem(
        kind="local_model",
        id=ident,
        source=source,
        trust="project" if configured else "user_local",
        endpoint=url,
        name=", ".join(models[:20]),
        health=Health(
            "available" if note is None else "degraded",
            ctx.now,
            version=f"{len(models)} model{'s' if len(models) != 1 else ''}",
        ),
        diagnostics=() if note is None else (note,),
    )


def _models(body: bytes, status: int, cap: int) -> tuple[list[str], Diagnostic | None]:
    if status != 200:
        return [], Diagnostic("warning", "health_check_failed", f"answered HTTP {status}")
    if len(body) > cap:
        return [], Diagnostic("warning", "output_too_large", f"model list over {cap} bytes")
    try:
        document: Any = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return [], Diagnostic("warning", "health_check_failed", "the model list is not JSON")
    entries: Sequence[Any] = []
    with contextlib.suppress(AttributeError, TypeError):
        entries = document.get("data") or document.get("models") or []
    names = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            value = entry.get("id") or entry.get("name") or entry.get("model")
            if isinstance(value, str):
                names.append(redact_text(value[:128]))
    return names, None
