"""Sub-agent bundles read and judged: the shipped examples load, every escape and broken
piece is refused with a reason, and the digest follows content, not key order."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroclaw.subagents import (
    MAX_FILE_BYTES,
    Bundle,
    BundleProblems,
    load_bundle,
    scan_bundles,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "etc" / "subagents"
PROVIDERS = frozenset({"offline.default"})


def copy_example(tmp_path: Path, name: str = "content-analyst") -> Path:
    target = tmp_path / "subagents" / name
    shutil.copytree(EXAMPLES / name, target)
    return target


def manifest(bundle: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((bundle / "agent.yaml").read_text())
    return data


def write_manifest(bundle: Path, data: dict[str, Any]) -> None:
    (bundle / "agent.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def problems(bundle: Path, **kwargs: Any) -> str:
    result = load_bundle(bundle, providers=PROVIDERS, **kwargs)
    assert isinstance(result, BundleProblems), result
    return "\n".join(result.problems)


def test_the_shipped_examples_load_with_the_offline_provider() -> None:
    loaded, refused = scan_bundles(EXAMPLES, providers=PROVIDERS)
    assert refused == []
    assert [b.manifest.id for b in loaded] == ["content-analyst", "summarizer"]
    analyst = loaded[0]
    assert "untrusted data" in analyst.system_prompt
    assert list(analyst.skills) == ["analysis-method"]
    assert analyst.output_schema is not None and analyst.input_schema is not None
    assert analyst.manifest.policy.maxConcurrency == 4
    assert len(analyst.digest) == 64


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("systemPrompt", "../outside.md", "'..' leads out of the bundle"),
        ("systemPrompt", "/etc/passwd", "an absolute path"),
        ("skills", ["../../skills/x"], "'..' leads out of the bundle"),
        ("inputSchema", "/tmp/x.json", "an absolute path"),
    ],
)
def test_paths_out_of_the_bundle_are_refused(
    tmp_path: Path, field: str, value: object, reason: str
) -> None:
    bundle = copy_example(tmp_path)
    (tmp_path / "subagents" / "outside.md").write_text("stolen")
    data = manifest(bundle)
    data[field] = value
    write_manifest(bundle, data)
    assert reason in problems(bundle)


def test_a_symlink_out_of_the_bundle_is_refused(tmp_path: Path) -> None:
    bundle = copy_example(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the model")
    (bundle / "SYSTEM.md").unlink()
    os.symlink(secret, bundle / "SYSTEM.md")
    assert "a symlink leads out of the bundle" in problems(bundle)
    # A symlink that stays inside is fine.
    (bundle / "SYSTEM.md").unlink()
    (bundle / "real.md").write_text("inside")
    os.symlink("real.md", bundle / "SYSTEM.md")
    assert isinstance(load_bundle(bundle, providers=PROVIDERS), Bundle)


def test_a_skill_without_front_matter_is_refused(tmp_path: Path) -> None:
    bundle = copy_example(tmp_path)
    (bundle / "skills" / "analysis-method" / "SKILL.md").write_text("1. just steps\n")
    assert "needs YAML front matter" in problems(bundle)


def test_a_schema_that_does_not_compile_is_refused(tmp_path: Path) -> None:
    bundle = copy_example(tmp_path)
    (bundle / "schemas" / "output.json").write_text(json.dumps({"type": "no-such-type"}))
    assert "not a valid JSON Schema 2020-12" in problems(bundle)
    (bundle / "schemas" / "output.json").write_text("{not json")
    assert "not JSON" in problems(bundle)


def test_an_unknown_provider_a_reserved_id_and_a_foreign_field_are_refused(
    tmp_path: Path,
) -> None:
    bundle = copy_example(tmp_path)
    data = manifest(bundle)
    write_manifest(bundle, {**data, "model_provider": "openai.nope"})
    assert "model_provider 'openai.nope' is not configured" in problems(bundle)
    write_manifest(bundle, data)
    assert "is reserved" in problems(bundle, reserved=frozenset({"content-analyst"}))
    write_manifest(bundle, {**data, "builtinTools": ["shell"]})
    assert "builtinTools" in problems(bundle)


def test_the_size_caps_hold(tmp_path: Path) -> None:
    bundle = copy_example(tmp_path)
    (bundle / "SYSTEM.md").write_text("x" * (MAX_FILE_BYTES + 1))
    assert f"at most {MAX_FILE_BYTES} per file" in problems(bundle)


def test_one_bad_bundle_is_reported_and_the_others_load(tmp_path: Path) -> None:
    good = copy_example(tmp_path, "summarizer")
    bad = copy_example(tmp_path, "content-analyst")
    (bad / "SYSTEM.md").unlink()
    loaded, refused = scan_bundles(good.parent, providers=PROVIDERS)
    assert [b.manifest.id for b in loaded] == ["summarizer"]
    assert [r.path.name for r in refused] == ["content-analyst"]
    assert "no such file" in refused[0].problems[0]
    assert scan_bundles(tmp_path / "none", providers=PROVIDERS) == ([], [])


def _digest(bundle: Path) -> str:
    result = load_bundle(bundle, providers=PROVIDERS)
    assert isinstance(result, Bundle), result
    return result.digest


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False))
def test_the_digest_ignores_key_order_and_follows_content(
    tmp_path_factory: pytest.TempPathFactory, rnd: Any
) -> None:
    bundle = copy_example(tmp_path_factory.mktemp("b"))
    before = _digest(bundle)
    data = manifest(bundle)
    keys = list(data)
    rnd.shuffle(keys)
    write_manifest(bundle, {k: data[k] for k in keys})
    schema_path = bundle / "schemas" / "output.json"
    schema = json.loads(schema_path.read_text())
    skeys = list(schema)
    rnd.shuffle(skeys)
    schema_path.write_text(json.dumps({k: schema[k] for k in skeys}, indent=rnd.randint(0, 4)))
    assert _digest(bundle) == before
    (bundle / "SYSTEM.md").write_text((bundle / "SYSTEM.md").read_text() + " ")
    assert _digest(bundle) != before
