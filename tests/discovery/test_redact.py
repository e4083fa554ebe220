"""Secret-looking keys are redacted wherever a manifest's content goes."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.discovery import REDACTED, contains_secret_keys, is_secret_key, redact, redact_text

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
