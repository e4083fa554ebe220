"""Secret-looking keys are redacted wherever a manifest's content goes."""

from __future__ import annotations

import json
import logging
from typing import Any, get_args

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.discovery.helpers import Project
from zeroclaw.cli.discover_cmd import item_json
from zeroclaw.config import load_config
from zeroclaw.discovery import (
    PLAIN_FIELDS,
    REDACTED,
    REDACTED_FIELDS,
    CacheFile,
    DecisionPolicy,
    DiscoveredItem,
    DiscoveryCache,
    DiscoveryService,
    Entry,
    Health,
    Outcome,
    RedactingFilter,
    RegistryChange,
    SecretKind,
    Snapshot,
    Source,
    contains_secret_keys,
    decide,
    is_secret_key,
    redact,
    redact_args,
    redact_item,
    redact_text,
    summarise,
    version_token,
)
from zeroclaw.events import EventSink

SECRET_KEYS = [
    "token",
    "GITHUB_TOKEN",
    "api_key",
    "x-api-key",
    "apiKey",
    "apikey",
    "clientSecret",
    "password",
    "db_passwd",
    "credentials",
    "Authorization",
    "cookie",
    "private_key",
    "privateKey",
]
PLAIN_KEYS = ["id", "name", "command", "args", "endpoint", "capabilities", "api_key_env"]


def test_secret_looking_keys_are_recognised_and_env_var_names_are_not() -> None:
    assert all(is_secret_key(k) for k in SECRET_KEYS)
    assert not any(is_secret_key(k) for k in PLAIN_KEYS)
    assert is_secret_key("TOKEN") and not is_secret_key("token_env")


def test_nested_values_are_replaced_and_the_input_is_left_alone() -> None:
    manifest = {"id": "gh", "env": {"GITHUB_TOKEN": "ghp_x"}, "servers": [{"password": "p"}]}
    out = redact(manifest)
    assert out == {
        "id": "gh",
        "env": {"GITHUB_TOKEN": REDACTED},
        "servers": [{"password": REDACTED}],
    }
    assert manifest["env"] == {"GITHUB_TOKEN": "ghp_x"}
    assert contains_secret_keys(manifest) and not contains_secret_keys({"id": "x"})


def test_credentials_in_urls_are_removed() -> None:
    assert redact_text("https://user:pw@example.test/v1") == f"https://{REDACTED}@example.test/v1"
    assert redact_text("http://127.0.0.1:11434/api/tags") == "http://127.0.0.1:11434/api/tags"
    assert redact({"endpoint": "https://k@h/"}) == {"endpoint": f"https://{REDACTED}@h/"}


# A marker no plain value or key holds: "00000000" alone also occurs inside an integer of
# the plain data (1562500000000), which is no leak.
secret_values = st.text(
    min_size=8, max_size=20, alphabet="abcdefghijklmnopqrstuvwxyz0123456789"
).map(lambda text: f"SECRET-{text}")
plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["a", "b", "codex"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(PLAIN_KEYS), inner, max_size=3)
    ),
    max_leaves=10,
)


@st.composite
def with_secrets(draw: st.DrawFn) -> tuple[Any, list[str]]:
    doc = draw(st.dictionaries(st.sampled_from(PLAIN_KEYS), plain, max_size=4))
    secrets = draw(st.lists(secret_values, min_size=1, max_size=4))
    for secret in secrets:
        # Plant each secret under a secret-looking key at some depth.
        key = draw(st.sampled_from(SECRET_KEYS))
        depth = draw(st.integers(0, 3))
        node: dict[str, Any] = doc
        for level in range(depth):
            child = node.setdefault(f"level{level}", {})
            if not isinstance(child, dict):
                child = node[f"level{level}"] = {}
            node = child
        node[key] = secret if draw(st.booleans()) else [secret, {"value": secret}]
    return doc, secrets


@given(with_secrets())
def test_no_planted_secret_survives_redaction(case: tuple[Any, list[str]]) -> None:
    doc, secrets = case
    text = json.dumps(redact(doc))
    for secret in secrets:
        assert secret not in text


# --- every field kind, every output surface (ADR 0047) ------------------------------------


def test_secret_named_options_and_key_shaped_arguments_are_replaced() -> None:
    args = redact_args(
        [
            "serve",
            "--api-key=sk-live1234567890",
            "--token",
            "t0ps3cret",
            "-p",
            "hunter2",
            "-phunter3",
            "ghp_abcdefghijklmnop1234",
            "Bearer abc.def",
            "--url=https://u:pw@h.test/x?api_key=k1&model=m",
            "--port",
            "8080",
        ]
    )
    assert args == (
        "serve",
        f"--api-key={REDACTED}",
        "--token",
        REDACTED,
        "-p",
        REDACTED,
        f"-p{REDACTED}",
        REDACTED,
        f"Bearer {REDACTED}",
        f"--url=https://{REDACTED}@h.test/x?api_key={REDACTED}&model=m",
        "--port",
        "8080",
    )


def test_urls_lose_userinfo_and_secret_parameters_and_keep_the_rest() -> None:
    url = "https://mcp.example.test/sse?model=m&key=k1&sig=s1&X-Amz-Signature=s2#access_token=t"
    assert redact_text(url) == (
        f"https://mcp.example.test/sse?model=m&key={REDACTED}&sig={REDACTED}"
        f"&X-Amz-Signature={REDACTED}#access_token={REDACTED}"
    )
    assert redact_text("http://127.0.0.1:11434/api/tags?format=json") == (
        "http://127.0.0.1:11434/api/tags?format=json"
    )


def test_a_probe_keeps_only_a_version_token_without_control_characters() -> None:
    assert version_token("codex-cli 1.2.3 (api_key=sk-x)\nmore") == "1.2.3"
    assert version_token("\x1b]52;c;aGk=\x07gemini v0.9.1-beta.2 token=x") == "0.9.1-beta.2"
    assert version_token("ollama version is 0.5") == "0.5"
    assert version_token("no version here sk-abcdefghijklmnop") == ""
    assert version_token("9" * 500) == ""  # a long number is no version
    assert len(version_token("1." + "2" * 200)) <= 40


def test_environment_entries_keep_only_their_names() -> None:
    item = DiscoveredItem(
        kind="mcp_server",
        id="x",
        source=Source("config", "mcp"),
        trust="project",
        env=("OPENAI_API_KEY=sk-x", "HOME", "bad name", "=x"),
    )
    assert redact_item(item).env == ("OPENAI_API_KEY", "HOME")


def test_every_text_field_of_a_found_item_is_redacted_or_declared_plain() -> None:
    text_fields = set(DiscoveredItem.__struct_fields__)
    assert set(REDACTED_FIELDS) | PLAIN_FIELDS >= text_fields - NOT_TEXT, (
        "a new field of DiscoveredItem must be redacted (REDACTED_FIELDS) or declared plain"
    )
    assert set(get_args(SecretKind)) == {k for kinds in REDACTED_FIELDS.values() for k in kinds}


NOT_TEXT = {
    "enabled",
    "required",
    "allow_unknown_capability",
    "timeout_ms",
    "max_output_bytes",
    "pinned",
    "input_schema",
    "output_schema",
}

_LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"
marker = st.text(min_size=8, max_size=16, alphabet=_LOWER).map(lambda t: f"SECRET{t}")
high_entropy = st.lists(st.sampled_from(_LOWER), min_size=20, max_size=30, unique=True).map(
    lambda chars: "SECRET7" + "".join(chars)
)
SECRET_PARAMS = ["api_key", "apikey", "key", "token", "access_token", "secret", "password", "sig"]


@st.composite
def planted(draw: st.DrawFn) -> tuple[str, DiscoveredItem, str]:
    """(kind, an item carrying one secret of that kind where it arrives, the secret)."""
    kind = draw(st.sampled_from(get_args(SecretKind)))
    secret = draw(marker)
    args: list[str] = draw(st.lists(st.sampled_from(["serve", "--stdio", "-v"]), max_size=3))
    endpoint, env, output = "", [], "prog 1.2.3"
    if kind == "option_value":
        name = draw(st.sampled_from(["--api-key", "--token", "--password", "--client-secret"]))
        args += draw(st.sampled_from([[f"{name}={secret}"], [name, secret], ["-p", secret]]))
    elif kind == "key_shaped":
        secret = draw(
            st.sampled_from([f"sk-{secret}", f"ghp_{secret}", f"xoxb-{secret}"]) | high_entropy
        )
        args.append(secret)
    elif kind == "auth_header":
        args += draw(
            st.sampled_from([[f"Bearer {secret}"], ["--header", f"Authorization: Bearer {secret}"]])
        )
    elif kind == "url_userinfo":
        endpoint = f"https://user:{secret}@mcp.example.test/sse"
    elif kind == "url_parameter":
        name = draw(st.sampled_from(SECRET_PARAMS))
        endpoint = draw(
            st.sampled_from(
                [
                    f"https://mcp.example.test/v1?model=m&{name}={secret}",
                    f"https://mcp.example.test/v1#{name}={secret}",
                ]
            )
        )
        if draw(st.booleans()):
            args.append(f"--url={endpoint}")
    elif kind == "env_value":
        env.append(f"SERVICE_TOKEN={secret}")
    else:
        output = f"prog 1.2.3 {draw(st.sampled_from(['', 'api_key=', 'Bearer ']))}{secret}"
    item = DiscoveredItem(
        kind="mcp_server",
        id="srv",
        source=Source("project_manifest", "mcp", "/p/mcp/srv.yaml", "mcp/srv.yaml"),
        trust="project",
        args=tuple(args),
        endpoint=endpoint,
        env=tuple(env),
        health=Health("available", 0.0, version_token(output)),
    )
    return kind, item, secret


def _snapshot(item: DiscoveredItem) -> Snapshot:
    [(found, decision)] = decide([item], DecisionPolicy(commands=frozenset()))
    return Snapshot(
        generated_at=0.0,
        workspace="/p",
        sources=(),
        entries=(Entry(found, decision),),
        summary=summarise([decision]),
    )


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> DiscoveryService:
    """The daemon's discovery service, publishing into a real event sink."""
    project = Project(tmp_path_factory.mktemp("redact"))
    path = project.write_config()
    return DiscoveryService(load_config(path), path, EventSink(), env=project.env())


@settings(max_examples=200, deadline=None)
@given(case=planted())
def test_no_planted_secret_reaches_any_output_surface(
    service: DiscoveryService, case: tuple[str, DiscoveredItem, str]
) -> None:
    """Each surface redacts by itself, even when handed what was never redacted."""
    kind, item, secret = case
    raw = _snapshot(item)
    # cache_file: the bytes the cache writes
    cache = DiscoveryCache(service.config_path.parent / "state")
    cache.write(
        CacheFile(
            schema_version=raw.schema_version,
            program_version=raw.program_version,
            config_hash="c",
            registry_hash="r",
            sources={},
            written_at=0.0,
            snapshot=raw,
        )
    )
    # scan/list/explain --json: the CLI's one item serialiser
    json_text = json.dumps([item_json(e) for e in raw.entries])
    # events: what the daemon's service publishes for this snapshot
    service._publish(
        Outcome(raw, False, "missing", None, "written"),
        None,
        RegistryChange(generation=1, added=(item.key,)),
    )
    events = msgspec.json.encode([p.event for p in service.events.recent(4)])
    # log: a message built from what was found
    record = logging.LogRecord("zeroclaw.discovery", logging.DEBUG, "", 0, "%s %s", None, None)
    record.args = (item.endpoint, " ".join(item.args))
    RedactingFilter().filter(record)
    surfaces = {
        "cache_file": cache.path.read_text(),
        "json": json_text,
        "events": events.decode(),
        "log": record.getMessage(),
    }
    for surface, text in surfaces.items():
        assert secret not in text, f"{kind} secret reached {surface}: {text[:400]}"
    if kind not in ("env_value", "probe_output"):
        # an item whose argument or endpoint held one is not used as written
        assert redact_item(item).errors("secret_redacted")


def test_go_style_single_dash_options_and_more_secret_names() -> None:
    assert redact_args(["-api-key", "k1", "-port", "8080", "-profile", "dev"]) == (
        "-api-key",
        REDACTED,
        "-port",
        "8080",
        "-profile",
        "dev",
    )
    assert redact_args(["--passphrase", "p1", "--pat", "p2", "--token-file", "/run/t"]) == (
        "--passphrase",
        REDACTED,
        "--pat",
        REDACTED,
        "--token-file",  # a file holding the secret: the recommended way, kept
        "/run/t",
    )
    assert not any(is_secret_key(k) for k in ("keyPath", "secret_name", "token_url", "apiKeyEnv"))
    assert (
        redact_text("ran: tool -api-key k1 --verbose") == f"ran: tool -api-key {REDACTED} --verbose"
    )
