from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
DEMO_CONFIG = REPO / "etc" / "zeroclaw.toml"

VALID_DOC: dict[str, Any] = {
    "daemon": {"state_dir": "state", "runtime_dir": "run"},
    "providers": {"offline": {"default": {}}},
    "risk_profiles": {"sup": {"level": "supervised"}, "full": {"level": "full"}},
    "runtime_profiles": {"default": {}},
    "channels": {
        "cli": {"local": {}},
        "webhook": {"ops": {"listen": "127.0.0.1:8787", "secret_env": "HOOK_SECRET"}},
    },
    "agents": {
        "alpha": {
            "model_provider": "offline.default",
            "risk_profile": "sup",
            "runtime_profile": "default",
            "channels": ["cli.local", "webhook.ops"],
            "delegates": ["beta"],
            "workspace": {"path": "ws/alpha", "access": {"beta": "read"}},
            "memory": {"read_memory_from": ["beta"]},
        },
        "beta": {
            "model_provider": "offline.default",
            "risk_profile": "sup",
            "runtime_profile": "default",
            "channels": ["cli.local"],
            "workspace": {"path": "ws/beta"},
        },
    },
    "peer_groups": {"ops": {"channel": "cli", "agents": ["alpha", "beta"]}},
}


@pytest.fixture
def doc() -> dict[str, Any]:
    """A valid config document each test may break in exactly one way."""
    return copy.deepcopy(VALID_DOC)


# --- real daemons (tests/supervisor/harness.py), for every test directory -----------------


@pytest.fixture
def root() -> Iterator[Path]:
    from tests.supervisor import harness  # imported late: the harness imports this module

    path = harness.short_root()
    yield path
    harness.remove_root(path)


@pytest.fixture
def daemons(root: Path) -> Iterator[Callable[..., Any]]:
    from tests.supervisor import harness

    started: list[Any] = []

    def make(doc: dict[str, Any], **kwargs: Any) -> Any:
        daemon = harness.Daemon(root, doc, **kwargs)
        started.append(daemon)
        return daemon

    yield make
    for daemon in started:
        daemon.stop()
