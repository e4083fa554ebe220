"""The webhook's pure decisions: signatures, the replay window and nonce cache, the rate
limiter, request paths and bodies, outcome statuses; and the webhook config rules."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.channels import ChannelAnswer, ChannelFailure, ChannelRefused, webhook_listeners
from zeroclaw.channels._webhook_core import (
    CALLBACK_BACKOFF_CAP_SECS,
    REPLAY_WINDOW_SECS,
    Approve,
    Gate,
    Health,
    MessageBody,
    Messages,
    NonceCache,
    RateLimiter,
    TurnResult,
    WebhookError,
    approval_callback_body,
    callback_body,
    callback_delays,
    callback_verdict,
    outcome_headers,
    outcome_response,
    parse_approval,
    parse_message,
    parse_route,
    parse_timestamp,
    sign,
    signature_ok,
)
from zeroclaw.config import ConfigError, WebhookChannel, daemon_refusals, validate_document

NOW = 1_800_000_000.0


# --------------------------------------------------------------------------- signature


@given(st.binary(min_size=1, max_size=64), st.integers(0, 10**11), st.binary(max_size=512))
def test_a_signature_is_hmac_sha256_of_timestamp_dot_body(
    secret: bytes, stamp: int, body: bytes
) -> None:
    ts = str(stamp)
    expected = hmac.new(secret, f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    assert sign(secret, ts, body) == f"sha256={expected}"
    assert signature_ok(secret, ts, body, sign(secret, ts, body))


@given(st.binary(min_size=1, max_size=64), st.binary(max_size=256), st.binary(max_size=256))
def test_any_change_breaks_the_signature(secret: bytes, body: bytes, other: bytes) -> None:
    good = sign(secret, "100", body)
    if other != body:
        assert not signature_ok(secret, "100", other, good)
    assert not signature_ok(secret, "101", body, good)
    assert not signature_ok(secret + b"x", "100", body, good)
    assert not signature_ok(secret, "100", body, good.removeprefix("sha256="))
    assert not signature_ok(secret, "100", body, None)
    assert not signature_ok(secret, "100", body, "sha256=é")


@given(st.integers(-1000, 1000))
def test_the_timestamp_window_is_plus_minus_300_seconds(offset: int) -> None:
    stamp = str(int(NOW) + offset)
    inside = abs(offset) <= REPLAY_WINDOW_SECS
    assert (parse_timestamp(stamp, NOW) is not None) == inside


@pytest.mark.parametrize("bad", [None, "", "-5", "1e9", "１２３", "12.5", "9" * 40])
def test_a_malformed_timestamp_is_stale(bad: str | None) -> None:
    assert parse_timestamp(bad, NOW) is None


# --------------------------------------------------------------------------- nonces


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=30))
def test_a_signature_is_accepted_once_within_the_window(signatures: list[str]) -> None:
    cache = NonceCache()
    seen: set[str] = set()
    for sig in signatures:
        assert cache.first_use(sig, NOW, NOW) is (sig not in seen)
        seen.add(sig)


def test_the_nonce_cache_forgets_what_the_window_refuses_anyway() -> None:
    cache = NonceCache(window=300)
    assert cache.first_use("a", NOW, NOW)
    assert cache.first_use("a", NOW, NOW + 300) is False
    # After its timestamp left the window the timestamp check refuses it; memory is freed.
    assert cache.first_use("b", NOW + 301, NOW + 301)
    assert len(cache) == 1


def test_a_full_nonce_cache_refuses_rather_than_forgets() -> None:
    cache = NonceCache(capacity=2)
    assert cache.first_use("a", NOW, NOW) and cache.first_use("b", NOW, NOW)
    assert cache.first_use("c", NOW, NOW) is None
    assert cache.first_use("a", NOW, NOW) is False


# --------------------------------------------------------------------------- rate


@given(st.integers(1, 120), st.lists(st.floats(0, 5), max_size=200))
def test_the_rate_limiter_admits_at_most_burst_plus_refill(
    per_minute: int, gaps: list[float]
) -> None:
    limiter = RateLimiter(per_minute)
    now, admitted = NOW, 0
    for gap in gaps:
        now += gap
        wait = limiter.admit("bob", now)
        if wait is None:
            admitted += 1
        else:
            assert wait >= 1
    assert admitted <= per_minute + (now - NOW) * per_minute / 60 + 1e-6


def test_retry_after_is_when_the_next_request_is_admitted() -> None:
    limiter = RateLimiter(2)  # a token every 30 s
    assert limiter.admit("bob", NOW) is None and limiter.admit("bob", NOW) is None
    wait = limiter.admit("bob", NOW)
    assert wait == 30
    assert limiter.admit("carol", NOW) is None  # per sender
    assert limiter.admit("bob", NOW + wait) is None


def test_the_limiter_forgets_idle_senders() -> None:
    limiter = RateLimiter(60, max_senders=10)
    for i in range(11):
        limiter.admit(f"s{i}", NOW)
    assert limiter.admit("late", NOW + 120) is None
    assert len(limiter._buckets) == 1


# --------------------------------------------------------------------------- gate


def gate() -> Gate:
    hook = WebhookChannel(listen="127.0.0.1:8787", secret_env="K", max_body_bytes=100)
    return Gate({"ops": hook}, {"ops": b"key"})


def test_the_gate_checks_channel_then_time_then_signature_then_replay() -> None:
    g, body, ts = gate(), b"{}", str(int(NOW))
    good = sign(b"key", ts, body)

    def code(alias: str, stamp: str | None, sig: str | None) -> str | None:
        refused = g.verify(alias, stamp, sig, body, NOW)
        return None if refused is None else refused.error

    assert code("nope", None, None) == "unknown_channel"
    assert code("ops", "1", good) == "stale_timestamp"
    assert code("ops", ts, "sha256=00") == "bad_signature"
    assert code("ops", ts, good) is None
    assert code("ops", ts, good) == "replay"
    assert g.body_limit("ops") == 100 and g.body_limit("nope") == 100


def test_a_read_may_be_verified_without_spending_its_nonce() -> None:
    g, ts = gate(), str(int(NOW))
    good = sign(b"key", ts, b"/v1/channels/ops/turns/x")
    for _ in range(3):
        assert g.verify("ops", ts, good, b"/v1/channels/ops/turns/x", NOW, once=False) is None


# --------------------------------------------------------------------------- paths, bodies


def test_routes() -> None:
    assert parse_route("POST", "/v1/channels/ops/messages") == Messages("ops")
    assert parse_route("POST", "/v1/channels/ops/approvals/a1") == Approve("ops", "a1")
    assert parse_route("GET", "/v1/channels/ops/turns/a1") == TurnResult("ops", "a1")
    assert parse_route("GET", "/healthz") == Health()
    wrong = parse_route("GET", "/v1/channels/ops/messages")
    assert isinstance(wrong, WebhookError) and wrong.status == 405
    missing = parse_route("POST", "/v1/channels/ops/other")
    assert isinstance(missing, WebhookError) and missing.status == 404


def test_message_bodies() -> None:
    parsed = parse_message(b'{"sender": "bob", "text": "hi", "agent": "alpha"}')
    assert parsed == MessageBody("bob", "hi", None, "alpha")
    for bad in [b"[]", b'{"sender": "", "text": "x"}', b'{"sender": "b", "text": 1}', b"\xff"]:
        refused = parse_message(bad)
        assert isinstance(refused, WebhookError) and refused.error == "bad_json"
    assert isinstance(parse_approval(b'{"approved": "yes"}'), WebhookError)
    approval = parse_approval(b'{"approved": false}')
    assert not isinstance(approval, WebhookError) and approval.approved is False


def test_outcome_statuses_and_bodies() -> None:
    status, body = outcome_response(ChannelAnswer("alpha", "hey"))
    assert status == 200
    assert msgspec.json.decode(body) == {"agent": "alpha", "reply": "hey", "tool_calls": []}
    for code, expected in [
        ("sender_ignored", 403),
        ("sender_not_accepted", 403),
        ("unknown_agent", 404),
        ("agent_not_bound", 404),
        ("no_owner", 404),
    ]:
        status, body = outcome_response(ChannelRefused(code, "why"))  # type: ignore[arg-type]
        assert status == expected
        assert msgspec.json.decode(body) == {"error": code, "message": "why"}
    assert outcome_response(ChannelFailure("timeout", "slow"))[0] == 504
    assert outcome_response(ChannelFailure("unavailable", "down"))[0] == 503
    # A budget refuses the turn before any provider call: 429, its own code (issue 27).
    refused = ChannelFailure("budget_exceeded", "turns_per_hour ...")
    status, body = outcome_response(refused)
    assert (status, msgspec.json.decode(body)["error"]) == (429, "budget_exceeded")
    assert outcome_headers(refused) == [(b"retry-after", b"60")]  # as the gateway's 429
    assert outcome_headers(ChannelFailure("timeout", "slow")) == []
    stopped = outcome_response(ChannelAnswer("alpha", "(stopped)", stopped="budget_exceeded"))
    assert msgspec.json.decode(stopped[1])["stopped"] == "budget_exceeded"


# --------------------------------------------------------------------------- config


def problems(doc: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        validate_document(doc, base_dir=Path("/srv/zc"), env={"HOME": "/home/op"})
    return {issue.key: issue.message for issue in info.value.issues}


@pytest.mark.parametrize("listen", ["0.0.0.0:8787", "192.168.1.5:80", "[::]:80", "example.org:80"])
def test_a_remote_listen_address_needs_allow_remote(doc: dict[str, Any], listen: str) -> None:
    doc["channels"]["webhook"]["ops"]["listen"] = listen
    found = problems(doc)
    assert list(found) == ["channels.webhook.ops.listen"]
    assert "allow_remote" in found["channels.webhook.ops.listen"]
    doc["channels"]["webhook"]["ops"]["allow_remote"] = True
    validate_document(doc, base_dir=Path("/srv/zc"), env={"HOME": "/home/op"})


@pytest.mark.parametrize("listen", ["127.0.0.1:8787", "127.3.2.1:1", "[::1]:8787", "localhost:9"])
def test_loopback_needs_nothing(doc: dict[str, Any], listen: str) -> None:
    doc["channels"]["webhook"]["ops"]["listen"] = listen
    validate_document(doc, base_dir=Path("/srv/zc"), env={"HOME": "/home/op"})


def test_webhooks_on_one_port_name_one_host(doc: dict[str, Any]) -> None:
    doc["channels"]["webhook"]["two"] = {"listen": "localhost:8787", "secret_env": "K2"}
    found = problems(doc)
    assert list(found) == ["channels.webhook.two.listen"]
    doc["channels"]["webhook"]["two"]["listen"] = "127.0.0.1:8787"
    config = validate_document(doc, base_dir=Path("/srv/zc"), env={"HOME": "/home/op"})
    doc["agents"]["alpha"]["channels"].append("webhook.two")
    config = validate_document(doc, base_dir=Path("/srv/zc"), env={"HOME": "/home/op"})
    # Two channels on one address share one server.
    assert list(webhook_listeners(config)) == ["127.0.0.1:8787"]
    assert sorted(webhook_listeners(config)["127.0.0.1:8787"]) == ["webhook.ops", "webhook.two"]


def test_a_bound_webhook_needs_its_secret_at_daemon_start(doc: dict[str, Any]) -> None:
    env = {"HOME": "/home/op"}
    config = validate_document(doc, base_dir=Path("/srv/zc"), env=env)
    refusals = daemon_refusals(config, env, Path("/srv/zc/zeroclaw.toml"))
    assert [i.key for i in refusals] == ["channels.webhook.ops.secret_env"]
    assert "HOOK_SECRET" in refusals[0].message
    env["HOOK_SECRET"] = "k"
    assert daemon_refusals(config, env, Path("/srv/zc/zeroclaw.toml")) == []
    # A webhook no agent binds (while others bind channels) never listens: no secret needed.
    doc["agents"]["alpha"]["channels"] = ["cli.local"]
    unbound = validate_document(doc, base_dir=Path("/srv/zc"), env=env)
    assert webhook_listeners(unbound) == {}
    assert daemon_refusals(unbound, {"HOME": "/home/op"}, Path("/srv/zc/z.toml")) == []


# --------------------------------------------------------------------------- callbacks


def test_callback_backoff_doubles_from_the_initial_delay_up_to_the_cap() -> None:
    assert callback_delays(5, 1.0) == [1.0, 2.0, 4.0, 8.0]
    assert callback_delays(1, 1.0) == []
    assert callback_delays(10, 1.0)[-3:] == [60.0, 60.0, 60.0]
    assert callback_delays(3, 0.01) == [0.01, 0.02]


@given(st.integers(1, 30), st.floats(0.001, 100.0))
def test_callback_backoff_is_monotone_and_capped(attempts: int, initial: float) -> None:
    delays = callback_delays(attempts, initial)
    assert len(delays) == attempts - 1
    assert delays == sorted(delays)
    assert all(0 < d <= CALLBACK_BACKOFF_CAP_SECS for d in delays)


def test_what_a_callback_answer_means() -> None:
    assert callback_verdict(None) == "retry"  # connection error, timeout
    for status in (500, 502, 503, 504, 429):
        assert callback_verdict(status) == "retry"
    for status in (200, 201, 202, 204):
        assert callback_verdict(status) == "delivered"
    for status in (301, 400, 401, 403, 404, 410, 413):
        assert callback_verdict(status) == "give_up"


def test_a_callback_body_is_the_response_body_with_its_status_and_message_id() -> None:
    status, body = outcome_response(ChannelAnswer("alpha", "hey", [], None, False))
    assert msgspec.json.decode(callback_body("m1", status, body)) == {
        "message_id": "m1",
        "status": 200,
        "agent": "alpha",
        "reply": "hey",
        "tool_calls": [],
    }
    status, body = outcome_response(ChannelFailure("timeout", "slow"))
    assert msgspec.json.decode(callback_body("m2", status, body)) == {
        "message_id": "m2",
        "status": 504,
        "error": "timeout",
        "message": "slow",
    }
    assert msgspec.json.decode(approval_callback_body("m3", "a1", "write x", "/u")) == {
        "message_id": "m3",
        "status": 202,
        "approval_id": "a1",
        "what": "write x",
        "status_url": "/u",
    }


@pytest.mark.parametrize(
    "url", ["https://hooks.example.org/zc", "http://10.0.0.5:80/x", "http://[::]:8/"]
)
def test_a_remote_callback_url_needs_allow_remote(doc: dict[str, Any], url: str) -> None:
    doc["channels"]["webhook"]["ops"]["callback_url"] = url
    found = problems(doc)
    assert list(found) == ["channels.webhook.ops.callback_url"]
    assert "allow_remote" in found["channels.webhook.ops.callback_url"]
    doc["channels"]["webhook"]["ops"]["allow_remote"] = True
    validate_document(doc, base_dir=Path("/srv/zc"), env={"HOME": "/home/op"})


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9000/cb", "https://localhost/cb", "http://[::1]:8/x"]
)
def test_a_loopback_callback_url_needs_nothing(doc: dict[str, Any], url: str) -> None:
    doc["channels"]["webhook"]["ops"]["callback_url"] = url
    config = validate_document(doc, base_dir=Path("/srv/zc"), env={"HOME": "/home/op"})
    assert config.channels.webhook["ops"].callback_url == url
    assert config.channels.webhook["ops"].callback_max_attempts == 5


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "127.0.0.1:9000", ""])
def test_a_callback_url_is_http_or_https(doc: dict[str, Any], url: str) -> None:
    doc["channels"]["webhook"]["ops"]["callback_url"] = url
    assert list(problems(doc)) == ["channels.webhook.ops.callback_url"]


def _spellings(name: str) -> list[str]:
    """The 64 spellings of a five-letter sender: each letter's case, with and without '@'."""
    cased = ["".join(c.upper() if m >> i & 1 else c for i, c in enumerate(name)) for m in range(32)]
    return [f"{at}{spelling}" for spelling in cased for at in ("", "@")]


def test_the_64_spellings_of_one_sender_share_one_rate_budget() -> None:
    hook = WebhookChannel(listen="127.0.0.1:8787", secret_env="K", rate_limit_per_minute=5)
    g = Gate({"ops": hook}, {"ops": b"key"})
    spellings = _spellings("cibot")
    assert len(set(spellings)) == 64
    verdicts = [g.rate("ops", s, NOW) for s in spellings]
    assert [v is None for v in verdicts] == [True] * 5 + [False] * 59
    assert {v.error for v in verdicts if v is not None} == {"rate_limited"}
    assert g.rate("ops", "someone-else", NOW) is None  # another sender has its own budget
