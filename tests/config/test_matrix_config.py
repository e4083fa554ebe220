"""The Matrix channel's config (ADR 0066): one credential, a full user id, https unless on
loopback, and a bound account whose credential variable is unset refused at start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zeroclaw.config import ConfigError, daemon_refusals, validate_document

ENV = {"HOME": "/home/op"}


def with_matrix(doc: dict[str, Any], **entry: Any) -> dict[str, Any]:
    doc["channels"]["matrix"] = {
        "home": {
            "homeserver": "https://matrix.example.org",
            "user_id": "@zc:example.org",
            "access_token_env": "ZC_MATRIX_TOKEN",
            **entry,
        }
    }
    return doc


def problems(doc: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        validate_document(doc, source="zc.toml", base_dir=Path("/srv/zc"), env=ENV)
    return {issue.key: issue.message for issue in info.value.issues}


def test_a_matrix_account_loads(doc: dict[str, Any]) -> None:
    config = validate_document(with_matrix(doc), base_dir=Path("/srv/zc"), env=ENV)
    assert "matrix.home" in config.channel_ids()


@pytest.mark.parametrize(
    "entry",
    [
        {"password_env": "ZC_MATRIX_PASSWORD"},  # both
        {"access_token_env": None},  # neither
    ],
)
def test_exactly_one_credential(doc: dict[str, Any], entry: dict[str, Any]) -> None:
    found = problems(with_matrix(doc, **entry))
    assert any("exactly one of access_token_env and password_env" in m for m in found.values())


def test_the_user_id_is_a_full_matrix_id(doc: dict[str, Any]) -> None:
    found = problems(with_matrix(doc, user_id="zc"))
    assert list(found) == ["channels.matrix.home.user_id"]


def test_plain_http_only_on_loopback(doc: dict[str, Any]) -> None:
    found = problems(with_matrix(doc, homeserver="http://matrix.example.org"))
    assert list(found) == ["channels.matrix.home.homeserver"]
    assert "in the clear" in found["channels.matrix.home.homeserver"]
    validate_document(
        with_matrix(doc, homeserver="http://127.0.0.1:8008"), base_dir=Path("/srv/zc"), env=ENV
    )


def test_a_bound_account_without_its_credential_is_refused_at_start(
    doc: dict[str, Any],
) -> None:
    doc = with_matrix(doc, access_token_env=None, password_env="ZC_MATRIX_PASSWORD")
    doc["agents"]["alpha"]["channels"] = [
        *doc["agents"]["alpha"].get("channels", []),
        "matrix.home",
    ]
    config = validate_document(doc, base_dir=Path("/srv/zc"), env=ENV)
    env = {**ENV, "HOOK_SECRET": "k"}  # the demo document's bound webhook's
    refusals = daemon_refusals(config, env, Path("/srv/zc/zeroclaw.toml"))
    assert [i.key for i in refusals] == ["channels.matrix.home.password_env"]
    assert "ZC_MATRIX_PASSWORD is not set" in refusals[0].message
    env["ZC_MATRIX_PASSWORD"] = "x"
    assert daemon_refusals(config, env, Path("/srv/zc/zeroclaw.toml")) == []
