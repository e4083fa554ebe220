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
from jsonschema import Draft202012Validator

from zeroclaw.subagents import (
    MAX_FILE_BYTES,
    Bundle,
    BundleProblems,
    load_bundle,
    scan_bundles,
)
from zeroclaw.subagents._bundle import MAX_SCHEMA_DEPTH, read_regular

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


def _deep_schema(bundle: Path) -> str:
    (bundle / "schemas" / "output.json").write_text("[" * 100_000 + "]" * 100_000)
    return "outputSchema './schemas/output.json': nested too deeply"


def _deep_manifest(bundle: Path) -> str:
    (bundle / "agent.yaml").write_text("[" * 50_000 + "]" * 50_000)
    return "agent.yaml: nested too deeply"


def _deep_front_matter(bundle: Path) -> str:
    skill = bundle / "skills" / "analysis-method" / "SKILL.md"
    skill.write_text("---\nx: " + "[" * 50_000 + "]" * 50_000 + "\n---\nbody\n")
    return "SKILL.md front matter is nested too deeply"


@pytest.mark.parametrize("poison", [_deep_schema, _deep_manifest, _deep_front_matter])
def test_a_deeply_nested_file_refuses_its_bundle_and_the_others_load(
    tmp_path: Path, poison: Any
) -> None:
    copy_example(tmp_path, "summarizer")
    reason = poison(copy_example(tmp_path, "content-analyst"))
    loaded, refused = scan_bundles(tmp_path / "subagents", providers=PROVIDERS)
    assert [b.manifest.id for b in loaded] == ["summarizer"]
    [bad] = refused
    assert any(reason in line for line in bad.problems), bad.problems


def test_a_schema_nested_past_the_depth_bound_is_refused_before_it_is_compiled(
    tmp_path: Path,
) -> None:
    bundle = copy_example(tmp_path)
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(MAX_SCHEMA_DEPTH):
        schema = {"type": "object", "properties": {"x": schema}}
    (bundle / "schemas" / "output.json").write_text(json.dumps(schema))
    assert f"nested more than {MAX_SCHEMA_DEPTH} levels deep" in problems(bundle)


def test_a_fifo_in_a_bundle_is_refused_without_blocking(tmp_path: Path) -> None:
    # A blocking open() of a FIFO with no writer never returns; this one would hang.
    bundle = copy_example(tmp_path)
    (bundle / "SYSTEM.md").unlink()
    os.mkfifo(bundle / "SYSTEM.md")
    assert "'./SYSTEM.md': not a regular file" in problems(bundle)


def test_a_directory_in_place_of_a_file_is_refused(tmp_path: Path) -> None:
    bundle = copy_example(tmp_path)
    (bundle / "SYSTEM.md").unlink()
    (bundle / "SYSTEM.md").mkdir()
    assert "'./SYSTEM.md': not a regular file" in problems(bundle)


def test_a_hard_link_is_refused_wherever_its_other_name_is(tmp_path: Path) -> None:
    # realpath() cannot tell a hard link from the file: its other name may be a secret
    # outside the bundle, so any regular file with more than one link is refused.
    bundle = copy_example(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("API_KEY=sk-live\n")
    (bundle / "SYSTEM.md").unlink()
    os.link(secret, bundle / "SYSTEM.md")
    assert "a hard link may lead out of the bundle" in problems(bundle)
    secret.unlink()  # the last other name gone: one link, an ordinary file again
    assert isinstance(load_bundle(bundle, providers=PROVIDERS), Bundle)


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(
    tmp_path: Path,
) -> None:
    # What locate() checked is not what open() meets: the file is opened component by
    # component from the bundle root, never following a symlink.
    root = tmp_path / "bundle"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "SKILL.md").write_text("---\nname: stolen\n---\n")
    root.mkdir()
    (root / "skills").symlink_to(outside)
    with pytest.raises(Exception, match="a symlink appeared"):
        read_regular(root, Path("skills/SKILL.md"), "skills/SKILL.md")
    (root / "plain.md").write_text("ok")
    assert read_regular(root, Path("plain.md"), "plain.md") == b"ok"


def test_the_file_cap_is_checked_on_what_is_read(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 11)
    (tmp_path / "fits").write_bytes(b"x" * 10)
    with pytest.raises(Exception, match="at most 10 per file"):
        read_regular(tmp_path, Path("big"), "big", cap=10)
    assert read_regular(tmp_path, Path("fits"), "fits", cap=10) == b"x" * 10


def _with_output_schema(tmp_path: Path, schema: dict[str, Any]) -> Bundle | BundleProblems:
    bundle = copy_example(tmp_path)
    (bundle / "schemas" / "output.json").write_text(json.dumps(schema))
    return load_bundle(bundle, providers=PROVIDERS)


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"$ref": "https://schemas.example.invalid/doc.json"}, "not a local reference"),
        ({"allOf": [{"$ref": "other.json#/a"}]}, "not a local reference"),
        ({"properties": {"x": {"$ref": "#/$defs/missing"}}}, "resolves to nothing"),
        ({"prefixItems": [{}], "items": {"$ref": "#/prefixItems/1"}}, "resolves to nothing"),
        ({"const": "text", "$ref": "#/const"}, "does not point at a schema"),
        ({"$anchor": "a", "properties": {"q": {"$ref": "#a"}}}, "an anchor reference"),
        ({"$dynamicRef": "#meta"}, "$dynamicRef '#meta': not allowed"),
        ({"$id": "https://evil.example/", "type": "object"}, "only a fragment"),
        # A pointer may make data a schema: a remote $ref hidden in `const` is refused too.
        ({"const": {"$ref": "https://x.invalid/"}, "$ref": "#/const"}, "not a local reference"),
    ],
)
def test_a_schema_ref_that_is_not_local_and_resolvable_is_refused_by_name(
    tmp_path: Path, schema: dict[str, Any], reason: str
) -> None:
    result = _with_output_schema(tmp_path, schema)
    assert isinstance(result, BundleProblems), result
    [line] = [p for p in result.problems if p.startswith("outputSchema")]
    assert reason in line
    for key in ("$ref", "$dynamicRef", "$id"):
        for value in _values_of(schema, key):
            if not str(value).startswith("#/const"):
                assert repr(value) in line


def _values_of(node: Any, key: str) -> list[Any]:
    if isinstance(node, list):
        return [v for item in node for v in _values_of(item, key)]
    if not isinstance(node, dict):
        return []
    here = [node[key]] if key in node else []
    return here + [v for child in node.values() for v in _values_of(child, key)]


def test_local_pointer_refs_resolve_as_the_validator_resolves_them(tmp_path: Path) -> None:
    schema = {
        "$id": "#",
        "$defs": {"a/b": {"type": "string"}, "c~d": {"type": "integer"}, "e f%": {}},
        "type": "object",
        "properties": {
            "x": {"$ref": "#/$defs/a~1b"},
            "y": {"$ref": "#/$defs/c~0d"},
            "z": {"$ref": "#/$defs/e%20f%25"},
            "tree": {"type": "array", "items": {"$ref": "#"}},
        },
    }
    result = _with_output_schema(tmp_path, schema)
    assert isinstance(result, Bundle), result
    validator = Draft202012Validator(schema)
    assert validator.is_valid({"x": "s", "y": 1, "z": None, "tree": [{"tree": []}]})
    assert not validator.is_valid({"x": 1})


def test_mcp_bindings_must_name_a_configured_server_and_tools_of_its_allowlist() -> None:
    from zeroclaw.subagents._bundle import mcp_binding_problems
    from zeroclaw.turns import McpBinding

    servers = {"time": ("get_current_time", "convert_time"), "git": ()}
    assert mcp_binding_problems([McpBinding("time", ("get_current_time",))], servers) == []
    assert mcp_binding_problems([McpBinding("git")], servers) == []  # binds, grants nothing
    [unknown] = mcp_binding_problems([McpBinding("nope", ("x",))], servers)
    assert "'nope' is not in [mcp_servers] (git, time)" in unknown
    [outside] = mcp_binding_problems([McpBinding("time", ("convert_time", "set_time"))], servers)
    assert "'set_time' not in [mcp_servers.time] tools" in outside
    [twice] = mcp_binding_problems([McpBinding("git"), McpBinding("git")], servers)
    assert "bound twice" in twice


def test_a_bundle_bound_outside_the_configs_servers_is_refused_only_when_checked(
    tmp_path: Path,
) -> None:
    bundle = copy_example(tmp_path)
    data = manifest(bundle)
    data["mcp"] = [{"server": "time", "tools": ["set_time"]}]
    (bundle / "agent.yaml").write_text(yaml.safe_dump(data))
    assert isinstance(load_bundle(bundle, providers=PROVIDERS), Bundle)
    refused = load_bundle(bundle, providers=PROVIDERS, mcp_servers={"time": ("get_current_time",)})
    assert isinstance(refused, BundleProblems)
    assert any("'set_time'" in p for p in refused.problems)
