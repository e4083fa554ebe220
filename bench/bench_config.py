"""Load + validate a 500-agent, 100-peer-group config against a bare tomllib parse."""

from __future__ import annotations

import random
import tomllib

import tomli_w

from zeroclaw.config import load_config_text

from ._harness import Result, median_seconds, result


def generate(agents: int = 500, groups: int = 100, seed: int = 7) -> str:
    rng = random.Random(seed)
    aliases = [f"agent-{i:03d}" for i in range(agents)]
    doc = {
        "daemon": {"state_dir": "/tmp/zc-bench/state", "runtime_dir": "/tmp/zc-bench/run"},
        "providers": {"offline": {"default": {}}},
        "risk_profiles": {
            "readonly": {"level": "readonly"},
            "supervised": {"level": "supervised", "allowed_commands": ["ls", "cat", "grep"]},
        },
        "runtime_profiles": {"default": {"restart": {"max_restarts": 5}}},
        "channels": {
            "cli": {"local": {}},
            "webhook": {"ops": {"listen": "127.0.0.1:8787", "secret_env": "HOOK"}},
        },
        "agents": {
            alias: {
                "description": f"bench agent {alias}",
                "model_provider": "offline.default",
                "risk_profile": rng.choice(["readonly", "supervised"]),
                "runtime_profile": "default",
                "channels": ["cli.local", "webhook.ops"],
                "delegates": rng.sample([a for a in aliases if a != alias], 2),
                "workspace": {
                    "path": f"ws/{alias}",
                    "access": {rng.choice([a for a in aliases if a != alias]): "read"},
                },
                "memory": {"read_memory_from": rng.sample([a for a in aliases if a != alias], 1)},
            }
            for alias in aliases
        },
        "peer_groups": {
            f"group-{g:03d}": {
                "channel": rng.choice(["cli", "cli.local", "webhook.ops"]),
                "agents": rng.sample(aliases, rng.randint(2, 10)),
                "external_peers": ["*"] if g % 3 == 0 else [],
            }
            for g in range(groups)
        },
    }
    return tomli_w.dumps(doc)


def run() -> list[Result]:
    text = generate()
    env = {"HOME": "/tmp"}
    tomllib_s = median_seconds(lambda: tomllib.loads(text))
    load_s = median_seconds(lambda: load_config_text(text, source="bench.toml", env=env))
    return [
        result(
            "config load+validate (500 agents, 100 groups)",
            load_s * 1000,
            "ms",
            "bare tomllib.loads of the same file",
            tomllib_s * 1000,
            target="ratio <= 3",
        )
    ]
