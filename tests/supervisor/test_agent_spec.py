"""The agent's start contract is typed all the way: nested structs for risk, runtime and
provider, built from the validated config, msgpack-able to the zygote, and decodable in a
process that never imports the config models."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec

from tests.conftest import REPO, VALID_DOC
from zeroclaw.agent import AgentSpec, RiskSpec, RuntimeSpec
from zeroclaw.agent._sandbox import connect_ports
from zeroclaw.config import validate_document
from zeroclaw.providers import AnthropicSpec, OfflineSpec, OpenAISpec
from zeroclaw.supervisor._spec import build_specs
from zeroclaw.supervisor._zygote import Spawn, decode_request, encode


def specs(doc: dict[str, Any]) -> dict[str, AgentSpec]:
    config = validate_document(doc, base_dir=Path("/srv"), env={"HOME": "/home/op"})
    return build_specs(config, {"HOME": "/home/op"}, Path("/srv"))


def networked_doc() -> dict[str, Any]:
    doc = copy.deepcopy(VALID_DOC)
    doc["providers"]["openai"] = {"local": {"base_url": "http://127.0.0.1:11434/v1", "model": "m"}}
    doc["providers"]["anthropic"] = {"main": {"model": "claude", "max_tokens": 99}}
    doc["agents"]["alpha"]["model_provider"] = "openai.local"
    doc["agents"]["beta"]["model_provider"] = "anthropic.main"
    doc["risk_profiles"]["sup"] = {
        "level": "supervised",
        "allowed_commands": ["ls", "git"],
        "forbidden_paths": ["~/.ssh", "/etc"],
        "sandbox": "none",
    }
    doc["runtime_profiles"]["default"] = {"max_tool_iterations": 3, "shell_timeout_secs": 7}
    return doc


def test_risk_runtime_and_provider_are_typed_structs_built_from_the_config() -> None:
    built = specs(networked_doc())
    alpha, beta = built["alpha"], built["beta"]
    assert alpha.risk == RiskSpec(
        profile="sup",
        level="supervised",
        workspace_only=True,
        allowed_commands=("git", "ls"),
        forbidden_paths=("/home/op/.ssh", "/etc"),
        require_approval_for_medium_risk=True,
        block_high_risk_commands=True,
        sandbox="none",
    )
    assert alpha.risk.asks_approval and alpha.risk.may_act
    assert alpha.runtime == RuntimeSpec(
        max_tool_iterations=3, max_actions_per_hour=60, shell_timeout_secs=7.0
    )
    assert alpha.provider_config == OpenAISpec(
        base_url="http://127.0.0.1:11434/v1",
        model="m",
        api_key_env=None,
        timeout_secs=60.0,
        max_retries=3,
    )
    assert isinstance(beta.provider_config, AnthropicSpec)
    assert beta.provider_config.api_key_env == "ANTHROPIC_API_KEY"
    assert beta.provider_config.max_tokens == 99
    assert specs(copy.deepcopy(VALID_DOC))["alpha"].provider_config == OfflineSpec()


def test_a_spec_crosses_to_the_zygote_and_back_unchanged() -> None:
    for spec in specs(networked_doc()).values():
        assert decode_request(encode(Spawn(1, spec, {}))) == Spawn(1, spec, {})


def test_an_agent_process_decodes_its_spec_without_the_config_models() -> None:
    spec = specs(networked_doc())["alpha"]
    code = (
        "import sys; from zeroclaw.supervisor._zygote import decode_request; import zeroclaw.agent;"
        "spec = decode_request(sys.stdin.buffer.read()).spec;"
        "print(spec.risk.level, spec.runtime.max_tool_iterations, spec.provider_config.model);"
        "print(sorted(m for m in sys.modules if m in ('pydantic', 'zeroclaw.config')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=encode(Spawn(1, spec, {})),
        capture_output=True,
        cwd=REPO,
        check=True,
    )
    assert result.stdout.decode().splitlines() == ["supervised 3 m", "[]"]


def test_the_agent_spec_carries_the_chain_its_ports_and_its_keys() -> None:
    doc = copy.deepcopy(VALID_DOC)
    doc["providers"]["openai"] = {
        "main": {"model": "m", "base_url": "http://127.0.0.1:4001/v1", "api_key_env": "MAIN_KEY"}
    }
    doc["providers"]["anthropic"] = {
        "backup": {"model": "c", "base_url": "http://127.0.0.1:4002", "api_key_env": "BACK_KEY"}
    }
    doc["agents"]["alpha"]["model_provider"] = [
        "openai.main",
        "anthropic.backup",
        "offline.default",
    ]
    spec = specs(doc)["alpha"]
    assert [m.name for m in spec.provider_chain()] == [
        "openai.main",
        "anthropic.backup",
        "offline.default",
    ]
    assert {"MAIN_KEY", "BACK_KEY"} <= set(spec.secret_env)
    assert connect_ports(spec) == (4001, 4002)


def test_memory_context_settings_reach_the_spec_and_defaults_match() -> None:
    from zeroclaw.agent import MemorySpec
    from zeroclaw.config import AgentConfig
    from zeroclaw.supervisor._spec import memory_spec

    assert memory_spec(AgentConfig()) == MemorySpec()  # one set of defaults
    doc = networked_doc()
    doc["agents"]["alpha"]["memory"] = {
        "recall": False,
        "recall_k": 3,
        "recall_budget_tokens": 200,
        "history_budget_tokens": 900,
        "compact": False,
    }
    assert specs(doc)["alpha"].memory == MemorySpec(False, 3, 200, 900, False)
    assert specs(doc)["beta"].memory == MemorySpec()


def test_every_provider_setting_reaches_the_spec_and_the_defaults_match() -> None:
    # A setting the config accepts but the agent never receives is silently ignored (an
    # answer_timeout_secs that cut nothing); a spec default that differs from the config's
    # would make an agent built from a default spec act otherwise.
    from zeroclaw.config import AnthropicProvider, OpenAIProvider

    for config_model, spec_type, ref in (
        (OpenAIProvider, OpenAISpec, "openai.local"),
        (AnthropicProvider, AnthropicSpec, "anthropic.main"),
    ):
        fields = msgspec.structs.fields(spec_type)
        for field in fields:
            declared = config_model.model_fields[field.name].default
            if field.default is not msgspec.NODEFAULT:
                assert field.default == declared, (spec_type.__name__, field.name)
        doc = networked_doc()
        kind, alias = ref.split(".")
        table = doc["providers"][kind][alias]
        changed = {
            "timeout_secs": 7.5,
            "answer_timeout_secs": 42.0,
            "max_retries": 9,
            "breaker_failures": 5,
            "breaker_open_secs": 11.0,
        }
        if spec_type is OpenAISpec:
            changed["stream_usage"] = False
        table.update(changed)
        doc["agents"]["alpha"]["model_provider"] = ref
        built = specs(doc)["alpha"].provider_config
        assert isinstance(built, spec_type)
        assert {name: getattr(built, name) for name in changed} == changed
        # Every setting of the spec is one the test changed, the table names or a default.
        assert {f.name for f in fields} <= {*changed, *table, "api_key_env", "base_url"}, spec_type
