"""What the product says exists: the tools, channel types, control commands, bus services,
risk levels and grant modes the conformance matrix must cover. Read from the product's own
registries, so a new entry there without a conformance entry fails `test_completeness`."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, get_args

from tests.conftest import REPO
from zeroclaw import tools
from zeroclaw.config import ChannelConfig, RiskProfile
from zeroclaw.control import (
    MCP_REQUEST_TYPES,
    REQUEST_TYPES,
    SCHEDULE_REQUEST_TYPES,
    SUBAGENT_REQUEST_TYPES,
)
from zeroclaw.turns import (
    ADAPTER_SERVICE,
    MCP_SERVICE,
    SCHEDULE_SERVICE,
    SUBAGENT_SERVICE,
    TURN_SERVICE,
    USAGE_SERVICE,
)


def agent_tools() -> frozenset[str]:
    """Every tool an agent's model may be offered: the built-in toolset, the sub-agent
    tools, the discovered-adapter tool, the skill tool and the reminder tools."""
    return frozenset(
        {
            *tools.DEFAULT_TOOLSET.names(),
            *tools.DISPATCH_TOOL_NAMES,
            tools.ADAPTER_TOOL,
            tools.SKILL_READ,
            *tools.REMINDER_TOOL_NAMES,
        }
    )


def channel_types() -> frozenset[str]:
    """The `[channels.<type>]` tables of the config model."""
    from zeroclaw.config import Config

    table = Config.model_fields["channels"].annotation
    assert table is not None and len(get_args(ChannelConfig)) == len(table.model_fields)
    return frozenset(table.model_fields)


def control_commands() -> frozenset[str]:
    """The control protocol's request tags (the daemon's command table serves each)."""
    return frozenset(
        str(t.__struct_config__.tag)
        for t in (
            *REQUEST_TYPES,
            *SUBAGENT_REQUEST_TYPES,
            *MCP_REQUEST_TYPES,
            *SCHEDULE_REQUEST_TYPES,
        )
    )


_SERVICE_NAMES = {
    "TURN_SERVICE": TURN_SERVICE,
    "SUBAGENT_SERVICE": SUBAGENT_SERVICE,
    "ADAPTER_SERVICE": ADAPTER_SERVICE,
    "MCP_SERVICE": MCP_SERVICE,
    "SCHEDULE_SERVICE": SCHEDULE_SERVICE,
    "USAGE_SERVICE": USAGE_SERVICE,
}


def bus_services() -> frozenset[str]:
    """The services the daemon registers on its router: the keys of `services={...}` in
    the daemon's Router(...) call (the daemon builds that dict inline; no registry exports
    it, so the source is the registry)."""
    source = (REPO / "zeroclaw" / "supervisor" / "_compose.py").read_text()
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Router":
            for kw in node.keywords:
                if kw.arg == "services" and isinstance(kw.value, ast.Dict):
                    names.update(_key(k) for k in kw.value.keys)
    assert names, "the daemon's Router(services={...}) call was not found"
    return frozenset(names)


def _key(node: Any) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and node.id in _SERVICE_NAMES:
        return _SERVICE_NAMES[node.id]
    raise AssertionError(f"a bus service key this registry cannot read: {ast.dump(node)}")


def code_path_kinds() -> frozenset[str]:
    """The kinds of the daemon's own code the product computes (ADR 0044)."""
    from zeroclaw.policy import CODE_PATH_KINDS

    return frozenset(CODE_PATH_KINDS)


def risk_levels() -> frozenset[str]:
    return frozenset(get_args(RiskProfile.model_fields["level"].annotation))


def access_modes() -> frozenset[str]:
    from zeroclaw.config import AgentConfig

    workspace = AgentConfig.model_fields["workspace"].annotation
    assert workspace is not None
    access = workspace.model_fields["access"].annotation
    return frozenset(get_args(get_args(access)[1]))


def discovery_surfaces() -> frozenset[str]:
    """Every place discovery's findings leave the process (the product's OutputSurface)."""
    from zeroclaw.discovery import OutputSurface

    return frozenset(get_args(OutputSurface))


def secret_kinds() -> frozenset[str]:
    """Every kind of secret that reaches a found item (the product's SecretKind)."""
    from zeroclaw.discovery import SecretKind

    return frozenset(get_args(SecretKind))


def repo_path(*parts: str) -> Path:
    return REPO.joinpath(*parts)


def http_listeners() -> frozenset[str]:
    """Every HTTP listener kind of the config model: each table with an `HttpLimits` field,
    named by its dotted place in the model (a dict of tables as `*`), e.g.
    `channels.webhook.*.limits`. A new listener gets its limits table, and so its cells."""
    from pydantic import BaseModel

    from zeroclaw.config import Config, HttpLimits

    found: set[str] = set()

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            annotation = info.annotation
            args = get_args(annotation)
            if annotation is HttpLimits:
                found.add(f"{prefix}{name}")
            elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
                walk(annotation, f"{prefix}{name}.")
            elif args and isinstance(args[-1], type) and issubclass(args[-1], BaseModel):
                walk(args[-1], f"{prefix}{name}.*.")  # dict[str, Model]
            elif args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
                walk(args[0], f"{prefix}{name}.")  # Model | None (the gateway's table)

    walk(Config, "")
    assert found, "no HttpLimits table found in the config model"
    return frozenset(found)


def origin_kinds() -> frozenset[str]:
    """Every kind of origin a turn can have (bus.ORIGIN_KINDS)."""
    from zeroclaw.bus import ORIGIN_KINDS

    return frozenset(ORIGIN_KINDS)


def quota_kinds() -> frozenset[str]:
    """Every cap a memory quota has (zeroclaw.memory.QuotaKind)."""
    from zeroclaw.memory import QUOTA_KINDS

    return frozenset(QUOTA_KINDS)


def validation_outcomes() -> frozenset[str]:
    """Every way a schema check ends (zeroclaw.subagents.Outcome's tags)."""
    from zeroclaw.subagents import VALIDATION_OUTCOMES

    return frozenset(VALIDATION_OUTCOMES)


def callable_adapter_kinds() -> frozenset[str]:
    """The kinds of registered adapter an agent's `invoke_adapter` runs (ADR 0054)."""
    from zeroclaw.discovery import CALLABLE_KINDS

    return frozenset(CALLABLE_KINDS)
