"""The only things discovery ever runs: an allowlisted program with `--version`, and one
bounded GET of a loopback model server's model list.

A probe gets a scrubbed environment (PATH, a private empty HOME, C locale), an empty
private working directory, its own process group, the scan's timeout and output cap; its
output is kept only as a short, redacted summary. No prompt, no network request of its
own making, nothing that writes where it matters.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from .._process import CannotStart, run_capped
from ._context import ScanContext
from ._model import Diagnostic, DiscoveredItem, Health, HealthStatus, Source
from ._redact import redact_text

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
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return redact_text(line[:SUMMARY_CHARS])


async def probe_version(item: DiscoveredItem, ctx: ScanContext) -> DiscoveredItem:
    """`<command> --version`, bounded; the item with its health and what the probe said."""
    now = ctx.now
    limits = ctx.limits
    with tempfile.TemporaryDirectory(prefix="zeroclaw-probe-") as home:
        env = {"PATH": ctx.env.get("PATH", ""), "HOME": home, "LANG": "C.UTF-8", "LC_ALL": "C"}
        try:
            outcome = await run_capped(
                [item.command, "--version"],
                timeout_secs=limits.command_check_timeout,
                env=env,
                cwd=home,
                output_cap=limits.max_command_output_bytes,
            )
        except CannotStart as exc:
            status: HealthStatus = (
                "permission_denied" if exc.kind == "exec_refused" else "unavailable"
            )
            return _with(
                item,
                Health(status, now, message=_summary(exc.detail)),
                Diagnostic(
                    "error",
                    "permission_denied" if status == "permission_denied" else "health_check_failed",
                    f"{item.program} --version could not run: {_summary(exc.detail)}",
                ),
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
        )
    version = _summary(outcome.output)
    if outcome.exit_code != 0:
        return _with(
            item,
            Health("unavailable", now, version, f"--version exited {outcome.exit_code}"),
            Diagnostic(
                "error",
                "health_check_failed",
                f"{item.program} --version exited {outcome.exit_code}: {version}",
            ),
        )
    if outcome.truncated:
        return _with(
            item,
            Health("degraded", now, version, "--version printed too much"),
            Diagnostic(
                "warning",
                "output_too_large",
                f"{item.program} --version printed more than {limits.max_command_output_bytes} "
                "bytes (max_command_output_bytes); only the first line is kept",
            ),
        )
    return _with(item, Health("available", now, version))


def _with(item: DiscoveredItem, health: Health, *notes: Diagnostic) -> DiscoveredItem:
    return msgspec.structs.replace(item, health=health, diagnostics=(*item.diagnostics, *notes))


async def check_health(items: list[DiscoveredItem], ctx: ScanContext) -> None:
    """Probe, in place, every item that has a program to probe: each program once (many
    adapters may run the same one), four at a time."""
    by_command: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        if item.kind == "cli_adapter" and item.command:
            by_command.setdefault(item.command, []).append(index)
    limiter = trio.CapacityLimiter(4)

    async def one(indices: list[int]) -> None:
        async with limiter:
            probed = await probe_version(items[indices[0]], ctx)
        added = probed.diagnostics[len(items[indices[0]].diagnostics) :]
        for index in indices:
            items[index] = _with(items[index], probed.health, *added)

    async with trio.open_nursery() as nursery:
        for indices in by_command.values():
            nursery.start_soon(one, indices)


# --- loopback model servers ----------------------------------------------------------------


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
        targets.append((base.split("://", 1)[1].split("/")[0], base + path, True))
    return targets


async def scan_model_servers(ctx: ScanContext) -> list[DiscoveredItem]:
    import httpx

    targets = model_targets(ctx)
    found: list[DiscoveredItem | None] = [None] * len(targets)
    timeout = httpx.Timeout(ctx.limits.command_check_timeout)
    async with (
        httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as client,
        trio.open_nursery() as nursery,
    ):
        for index, target in enumerate(targets):
            nursery.start_soon(_probe_server, client, ctx, target, found, index)
    return [item for item in found if item is not None]


async def _probe_server(
    client: httpx.AsyncClient,
    ctx: ScanContext,
    target: tuple[str, str, bool],
    found: list[DiscoveredItem | None],
    index: int,
) -> None:
    name, url, configured = target
    host = url.split("://", 1)[1].split("/")[0]
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
