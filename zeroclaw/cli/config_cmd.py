"""`zeroclaw config validate|show|schema|init`."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import click
import tomli_w

from .._atomic import atomic_write
from ..config import (
    SYSTEM_CONFIG,
    Config,
    ConfigError,
    ConfigIssue,
    all_channel_peers,
    channel_owners,
    daemon_paths,
    daemon_refusals,
    effective_risk_policy,
    load_config,
    starter_document,
    subagents_dir,
    user_config_path,
    validate_document,
    workspace_path,
)
from ._app import cli
from ._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliError,
    emit_json,
    error_json,
    json_option,
    plural,
    print_config_error,
    state,
    wants_json,
)


@cli.group("config")
def config_group() -> None:
    """Validate, inspect and create the config file."""


# --------------------------------------------------------------------------- validate


@config_group.command("validate")
@click.argument("path", required=False)
@json_option
def validate_cmd(path: str | None, as_json: bool) -> None:
    """Check a config file; print every problem at once. Exit 0 valid, 2 invalid."""
    target = Path(path) if path else state().locate()
    try:
        config = load_config(target)
    except ConfigError as exc:
        if wants_json(as_json):
            emit_json(
                {
                    "file": str(target),
                    "valid": False,
                    "errors": [issue.as_json() for issue in exc.issues],
                    **error_json("config_invalid", "\n".join(exc.lines())),
                }
            )
        else:
            print_config_error(exc)
        sys.exit(EXIT_USAGE)
    summary = _summary(config)
    # Valid, but what the daemon would refuse to run (e.g. no enabled agent) is a warning:
    # a file being built up is still checked, and the operator learns what a start needs.
    warnings = daemon_refusals(config, os.environ, Path(os.path.abspath(target)))
    warnings += _skill_refusals(config, target)
    pinned = [
        *_pin_warnings(config),
        *_binding_warnings(config, target),
        *_endpoint_warnings(config),
    ]
    if wants_json(as_json):
        emit_json(
            {
                "ok": True,
                "file": str(target),
                "valid": True,
                "errors": [],
                "warnings": [issue.as_json() for issue in (*warnings, *pinned)],
                "summary": summary,
            }
        )
    else:
        counts = ", ".join(
            plural(n, k.replace("_", " ").removesuffix("s")) for k, n in summary.items()
        )
        click.echo(f"{target}: valid ({counts})")
        for issue in warnings:
            click.echo(f"warning: {issue.format(str(target))} (the daemon refuses this)", err=True)
        for issue in pinned:
            click.echo(f"warning: {issue.format(str(target))}", err=True)


def _skill_refusals(config: Config, target: Path) -> list[ConfigIssue]:
    """Each agent's skills refused, with its reason code (ADR 0056): the daemon refuses to
    start, or reload, with one."""
    if not any(agent.skills for agent in config.agents.values()):
        return []  # the skills code is not even loaded
    from ..skills import load_catalogue

    return load_catalogue(config, Path(os.path.abspath(target))).issues()


def _pin_warnings(config: Config) -> list[ConfigIssue]:
    """What the daemon's MCP pins say about the config: a readonly agent bound to a tool
    they record as not read-only (issue 26). The config's rules read no state, so this is
    read here; no pin store (no daemon has run, or no agent has MCP servers) says nothing."""
    if not any(agent.mcp for agent in config.agents.values()):
        return []
    from ..pins import PinStore, PinStoreCorrupt, pins_path, readonly_pin_issues

    store = PinStore(pins_path(daemon_paths(config, os.environ).state_dir))
    try:
        book = store.read()  # changes nothing, not even a cut write's leftovers
    except PinStoreCorrupt as exc:
        return [ConfigIssue(("mcp_servers",), str(exc))]
    except OSError:
        return []  # the state dir is not ours to read (doctor says so)
    return [] if book is None else readonly_pin_issues(config, book)


def _endpoint_warnings(config: Config) -> list[ConfigIssue]:
    """Agents that list an adapter reached over HTTP whose endpoint their risk profile does
    not allow (ADR 0054), as the last discovery scan found the adapter (its cache: the
    config's rules read no manifest). No cache, or no agent with adapters, says nothing."""
    if not any(agent.adapters for agent in config.agents.values()):
        return []
    from ..discovery import DiscoveryCache, endpoint_reach

    cached = DiscoveryCache(daemon_paths(config, os.environ).state_dir).read(repair=False)
    if cached.cache is None:
        return []
    issues = []
    for entry in cached.cache.snapshot.entries:
        if not entry.decision.registered:
            continue
        reach = endpoint_reach(config, entry.item, os.environ)
        if reach is None or not reach.endpoint:
            continue
        for grant in reach.grants:
            if grant.allowed:
                continue
            index = config.agents[grant.agent].adapters.index(entry.item.id)
            issues.append(
                ConfigIssue(
                    ("agents", grant.agent, "adapters", index),
                    f"adapter {entry.item.id!r} is at {reach.endpoint} (as the last discovery "
                    f"scan found it), which risk profile {grant.profile!r} does not list in "
                    "allowed_endpoints: its calls are refused",
                )
            )
    return issues


def _binding_warnings(config: Config, target: Path) -> list[ConfigIssue]:
    """The sub-agent bundles whose `mcp` bindings the config cannot honour (issue 26): a
    server not in `[mcp_servers]`, a tool outside its allowlist. The daemon refuses such a
    bundle (and loads the others), so each is a warning here, keyed by the bundle."""
    from ..subagents import RESERVED_IDS, scan_bundles

    directory = subagents_dir(config, Path(os.path.abspath(target)))
    _, refused = scan_bundles(
        directory,
        providers=frozenset(config.provider_ids()),
        reserved=RESERVED_IDS | frozenset(config.agents),
        mcp_servers={name: s.tools for name, s in config.mcp_servers.items()},
    )
    return [
        ConfigIssue(("subagents", bundle.path.name), f"{problem} (the daemon refuses this bundle)")
        for bundle in refused
        for problem in bundle.problems
        if problem.startswith("mcp: ")
    ]


def _summary(config: Config) -> dict[str, int]:
    return {
        "agents": len(config.agents),
        "enabled_agents": sum(a.enabled for a in config.agents.values()),
        "peer_groups": len(config.peer_groups),
        "channels": len(config.channel_ids()),
        "providers": len(config.provider_ids()),
    }


# --------------------------------------------------------------------------- show


def secret_references(config: Config) -> dict[str, str]:
    """Env var names the config refers to for secrets, and whether each is set — never values."""
    names: set[str] = set()
    names.update(p.api_key_env for p in config.providers.openai.values() if p.api_key_env)
    names.update(p.api_key_env for p in config.providers.anthropic.values())
    names.update(hook.secret_env for hook in config.channels.webhook.values())
    return {name: ("set" if os.environ.get(name) else "missing") for name in sorted(names)}


def resolved_view(config: Config, source: Path) -> dict[str, object]:
    """The config as the daemon will act on it: defaults filled, paths and policies resolved."""
    env = os.environ
    paths = daemon_paths(config, env)
    peers = all_channel_peers(config)
    agents: dict[str, object] = {}
    for alias, agent in sorted(config.agents.items()):
        entry: dict[str, object] = {
            "enabled": agent.enabled,
            "workspace": str(workspace_path(config, alias, paths)),
        }
        if agent.risk_profile is not None:
            policy = effective_risk_policy(config, alias, env, source.parent)
            entry["effective_risk"] = {
                "profile": policy.profile,
                "level": policy.level,
                "workspace_only": policy.workspace_only,
                "allowed_commands": sorted(policy.allowed_commands),
                "forbidden_paths": [str(p) for p in policy.forbidden_paths],
                "asks_approval": policy.asks_approval,
                "sandbox": policy.sandbox,
            }
        entry["peers"] = {
            channel: {
                "agents": sorted(p.agents),
                "groups": list(p.groups),
                "external_any": p.external.allow_any,
                "external_allowed": sorted(p.external.allowed),
                "external_ignored": sorted(p.external.ignored),
            }
            for channel, p in peers[alias].items()
            if p.groups
        }
        agents[alias] = entry
    return {
        "state_dir": str(paths.state_dir),
        "runtime_dir": str(paths.runtime_dir),
        "subagents_dir": str(subagents_dir(config, source)),
        "channel_owners": {k: list(v) for k, v in channel_owners(config).items()},
        "agents": agents,
    }


def loadable_document(config: Config, source: Path) -> dict[str, object]:
    """The config as a document that loads back to the same config from any directory: every
    default filled in, and the daemon's dirs (which a relative path or the environment
    decides) written out as the absolute paths they resolve to here."""
    data = config.model_dump(mode="json", exclude_none=True)
    paths = daemon_paths(config, os.environ)
    daemon = data.setdefault("daemon", {})
    daemon["state_dir"], daemon["runtime_dir"] = str(paths.state_dir), str(paths.runtime_dir)
    return data


@config_group.command("show")
@click.option(
    "--loadable",
    is_flag=True,
    help="Only the config itself, defaults filled in, as a TOML file 'config validate' accepts.",
)
@json_option
def show_cmd(loadable: bool, as_json: bool) -> None:
    """Print the resolved config. Secrets appear only as the names of their env vars."""
    source, config = state().load()
    data = loadable_document(config, source)
    if loadable and not wants_json(as_json):
        click.echo(f"# {source}, every default filled in (zeroclaw config show --loadable)")
        click.echo(tomli_w.dumps(data).rstrip())
        return
    resolved = resolved_view(config, source)
    secrets = secret_references(config)
    if wants_json(as_json):
        emit_json({"file": str(source), "config": data, "resolved": resolved, "secrets": secrets})
        return
    click.echo(f"# {source} (resolved; defaults filled in)")
    click.echo(tomli_w.dumps(data).rstrip())
    click.echo("\n# --- resolved")
    click.echo(tomli_w.dumps({"resolved": resolved, "secrets": secrets}).rstrip())


# --------------------------------------------------------------------------- schema


@config_group.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of the config file, with every field's description."""
    schema = Config.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "zeroclaw configuration"
    click.echo(json.dumps(schema, indent=2))


# --------------------------------------------------------------------------- init

SYSTEM_STATE_DIR = "/var/lib/zeroclaw"  # systemd's StateDirectory=zeroclaw
SYSTEM_RUNTIME_DIR = "/run/zeroclaw"  # systemd's RuntimeDirectory=zeroclaw


def init_paths(target: Path, document: dict[str, object], env: Mapping[str, str]) -> dict[str, str]:
    """The state and runtime dirs `config init` writes: systemd's for the system config, else
    the ones a daemon started from this environment would take."""
    if os.path.abspath(target) == str(SYSTEM_CONFIG):
        return {"state_dir": SYSTEM_STATE_DIR, "runtime_dir": SYSTEM_RUNTIME_DIR}
    paths = daemon_paths(validate_document(document, base_dir=target.parent), env)
    return {"state_dir": str(paths.state_dir), "runtime_dir": str(paths.runtime_dir)}


@config_group.command("init")
@click.argument("path", required=False)
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@json_option
def init_cmd(path: str | None, force: bool, as_json: bool) -> None:
    """Write a minimal valid config (default: the XDG config path)."""
    target = Path(path or state().config_path or user_config_path(os.environ))
    if target.exists() and not force:
        raise CliError(f"{target} already exists; pass --force to overwrite it", EXIT_FAILED)
    document = starter_document()
    # Both directories go into the file, so the CLI and the daemon agree on them whatever
    # their environments (systemd sets STATE_DIRECTORY for the daemon, not for a shell).
    document = {"daemon": init_paths(target, document, os.environ), **document}
    validate_document(document, source=str(target), base_dir=target.parent)  # never write junk
    text = "# zeroclaw config; see `zeroclaw config schema` for every key.\n" + tomli_w.dumps(
        document
    )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, text.encode(), mode=0o644)
    except OSError as exc:
        raise CliError(f"cannot write {target}: {exc.strerror}", EXIT_FAILED) from None
    if wants_json(as_json):
        emit_json({"file": str(target), "written": True})
    else:
        click.echo(f"wrote {target}; check it with: zeroclaw --config {target} config validate")
