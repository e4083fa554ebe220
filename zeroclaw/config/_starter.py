"""The minimal valid config `zeroclaw config init` writes."""

from __future__ import annotations

from typing import Any


def starter_document() -> dict[str, Any]:
    """One offline agent on one CLI channel, under a supervised profile."""
    return {
        "providers": {"offline": {"default": {}}},
        "risk_profiles": {
            "supervised": {
                "level": "supervised",
                "workspace_only": True,
                "allowed_commands": ["ls", "cat", "grep", "wc"],
                "require_approval_for_medium_risk": True,
                "sandbox": "auto",
            }
        },
        "runtime_profiles": {"default": {"activation": "always"}},
        "channels": {"cli": {"local": {}}},
        "agents": {
            "assistant": {
                "description": "General assistant",
                "model_provider": "offline.default",
                "risk_profile": "supervised",
                "runtime_profile": "default",
                "channels": ["cli.local"],
            }
        },
    }
