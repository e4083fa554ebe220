"""JSON Schemas (2020-12) of the manifests discovery reads beside the config file.

They are the reference for operators too: `zeroclaw discover schema adapter|capability|mcp`
prints them. Unknown keys are errors, so a typo is reported, not silently ignored.
"""

from __future__ import annotations

from typing import Any

ID = {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]{0,63}$"}
CAPABILITY_NAME = {
    "type": "string",
    "pattern": "^[a-z][a-z0-9_-]*(\\.[a-z0-9_-]+)*$",
    "maxLength": 128,
}
ENV_NAME = {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,127}$"}
STRINGS = {"type": "array", "items": {"type": "string", "maxLength": 4096}, "maxItems": 256}
NAMES = {"type": "array", "items": {"type": "string", "maxLength": 256}, "maxItems": 1024}
TIMEOUT = {"type": "integer", "minimum": 1, "maximum": 600_000}
URL = {"type": "string", "pattern": "^https?://[^\\s/@]+(/.*)?$", "maxLength": 2048}

ADAPTER: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "zeroclaw adapter manifest (adapters/*.yaml)",
    "type": "object",
    "required": ["id", "transport"],
    "additionalProperties": False,
    "properties": {
        "id": ID,
        "name": {"type": "string", "maxLength": 200},
        "description": {"type": "string", "maxLength": 2000},
        "transport": {"enum": ["cli", "http", "mcp", "skill"]},
        "enabled": {"type": "boolean"},
        "required": {"type": "boolean"},
        "capabilities": {"type": "array", "items": CAPABILITY_NAME, "uniqueItems": True},
        "allow_unknown_capability": {"type": "boolean"},
        # cli (and mcp over stdio): a program name from [discovery] commands, or its path
        "command": {"type": "string", "minLength": 1, "maxLength": 4096},
        "args": STRINGS,
        "timeout_ms": TIMEOUT,
        "max_output_bytes": {"type": "integer", "minimum": 64, "maximum": 16 * 1024 * 1024},
        # http: the endpoint, or the variable that holds it; credentials by variable only
        "endpoint": URL,
        "endpoint_env": ENV_NAME,
        "api_key_env": ENV_NAME,
        "env": {"type": "array", "items": ENV_NAME, "uniqueItems": True},
        # mcp: what of the server may be exposed
        "tools": NAMES,
        "resources": NAMES,
        "prompts": NAMES,
        # skill: the explicit manifest of a skill found in a user directory (its `id` is the
        # skill's), which classifies it and may make it registrable (ADR 0034)
        "skill_kind": {"enum": ["workflow_skill", "runtime_worker", "prompt_role"]},
        "input_schema": {"type": "string", "minLength": 1, "maxLength": 4096},
        "output_schema": {"type": "string", "minLength": 1, "maxLength": 4096},
        "runtime_gate": {"type": "string", "maxLength": 64},
    },
    "allOf": [
        {
            "if": {"properties": {"transport": {"const": "cli"}}},
            "then": {"required": ["command"]},
        },
        {
            "if": {"properties": {"transport": {"const": "http"}}},
            "then": {"anyOf": [{"required": ["endpoint"]}, {"required": ["endpoint_env"]}]},
        },
        {
            "if": {"properties": {"transport": {"const": "skill"}}},
            "then": {"required": ["skill_kind"]},
        },
    ],
}

_CAPABILITY_ENTRY: dict[str, Any] = {
    "type": "object",
    "required": ["name", "side_effect"],
    "additionalProperties": False,
    "properties": {
        "name": CAPABILITY_NAME,
        "description": {"type": "string", "maxLength": 2000},
        "input_schema": {"type": "string", "maxLength": 4096},
        "output_schema": {"type": "string", "maxLength": 4096},
        "side_effect": {
            "enum": [
                "none",
                "read_only_external",
                "writes_workspace",
                "writes_external",
                "shell_or_process",
            ]
        },
        "default_timeout_ms": TIMEOUT,
        "allow_auto_route": {"type": "boolean"},
        "audit": {"type": "array", "items": {"type": "string", "maxLength": 128}},
    },
}

CAPABILITIES: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "zeroclaw capability registry file (capabilities/*.yaml)",
    "oneOf": [
        _CAPABILITY_ENTRY,
        {
            "type": "object",
            "required": ["capabilities"],
            "additionalProperties": False,
            "properties": {"capabilities": {"type": "array", "items": _CAPABILITY_ENTRY}},
        },
    ],
}

MCP: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "zeroclaw MCP server manifest (mcp/*.yaml)",
    "type": "object",
    "required": ["id", "transport"],
    "additionalProperties": False,
    "properties": {
        "id": ID,
        "description": {"type": "string", "maxLength": 2000},
        "transport": {"enum": ["stdio", "http"]},
        "enabled": {"type": "boolean"},
        "required": {"type": "boolean"},
        "command": {"type": "string", "minLength": 1, "maxLength": 4096},
        "args": STRINGS,
        "endpoint": URL,
        "env": {"type": "array", "items": ENV_NAME, "uniqueItems": True},
        "timeout_ms": TIMEOUT,
        "capabilities": {"type": "array", "items": CAPABILITY_NAME, "uniqueItems": True},
        "tools": NAMES,
        "resources": NAMES,
        "prompts": NAMES,
    },
    # stdio: a program to start; http: an endpoint to reach. Never both: which one would run
    # is not for discovery to guess.
    "allOf": [
        {
            "if": {"properties": {"transport": {"const": "stdio"}}},
            "then": {"required": ["command"], "not": {"required": ["endpoint"]}},
        },
        {
            "if": {"properties": {"transport": {"const": "http"}}},
            "then": {"required": ["endpoint"], "not": {"required": ["command"]}},
        },
    ],
}

SCHEMAS = {"adapter": ADAPTER, "capability": CAPABILITIES, "mcp": MCP}
