"""HTTP adapters, the pure half (ADR 0054): whether a call may reach its endpoint (decided
before any connection), what is sent, and how every kind of reply reads — its status,
whether it is worth asking again, the cap, and the bearer token cut out of anything the
service sends back."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.discovery import (
    CallRefused,
    DiscoveredItem,
    HttpAdapterRequest,
    Reach,
    Source,
    http_reply,
    no_reply,
    reach,
    read_limit,
    render_body,
    request_body,
    scrub,
    shown_url,
)
from zeroclaw.turns import adapter_retryable, http_status_retryable

KEY = "zc-unit-bearer-token-5a9e"
SOURCE = Source("project_manifest", "adapters", "/p/adapters/api.yaml", "adapters/api.yaml")


def item(**fields: object) -> DiscoveredItem:
    base: dict[str, object] = {
        "kind": "http_adapter",
        "id": "api",
        "source": SOURCE,
        "trust": "explicit_remote",
        "capabilities": ("chat.reply",),
    }
    return DiscoveredItem(**{**base, **fields})  # type: ignore[arg-type]


def decide(
    found: DiscoveredItem, allowed: tuple[str, ...], env: dict[str, str] | None = None
) -> Reach | CallRefused:
    return reach(found, agent="alpha", profile="sup", allowed=allowed, env=env or {})


# --- where a call may go ------------------------------------------------------------------


def test_a_listed_endpoint_is_reached_at_the_manifests_url() -> None:
    got = decide(item(endpoint="http://127.0.0.1:8080/run?v=1"), ("127.0.0.1:8080",))
    assert got == Reach(
        "http://127.0.0.1:8080/run?v=1", "127.0.0.1:8080", "http://127.0.0.1:8080/run"
    )


def test_an_endpoint_the_profile_does_not_list_is_refused_naming_the_fix() -> None:
    got = decide(item(endpoint="https://api.example.test/v1"), ("127.0.0.1:8080",))
    assert isinstance(got, CallRefused) and got.code == "endpoint_not_allowed"
    assert 'add "api.example.test:443" to [risk_profiles.sup] allowed_endpoints' in got.message


def test_endpoint_env_is_read_from_the_daemons_environment() -> None:
    found = item(endpoint_env="API_URL")
    ok = decide(found, ("api.test:443",), {"API_URL": " https://api.test/x "})
    assert isinstance(ok, Reach) and ok.url == "https://api.test/x"
    unset = decide(found, ("api.test:443",), {})
    assert isinstance(unset, CallRefused) and unset.code == "endpoint_invalid"
    assert "$API_URL" in unset.message


@pytest.mark.parametrize(
    "value",
    ["ftp://api.test/", "api.test:443", "https://user:pw@api.test/", "https://:x@api.test/", "/x"],
)
def test_an_endpoint_that_is_no_plain_http_url_is_invalid(value: str) -> None:
    got = decide(item(endpoint_env="API_URL"), ("api.test:443", "api.test:21"), {"API_URL": value})
    assert isinstance(got, CallRefused) and got.code == "endpoint_invalid"
    assert "pw" not in got.message and "x@" not in got.message  # never echoed


def test_a_named_key_the_daemon_lacks_is_refused_after_the_endpoint_check() -> None:
    found = item(endpoint="http://127.0.0.1:1/", api_key_env="API_KEY")
    missing = decide(found, ("127.0.0.1:1",), {})
    assert isinstance(missing, CallRefused) and missing.code == "api_key_missing"
    assert "$API_KEY" in missing.message
    assert isinstance(decide(found, ("127.0.0.1:1",), {"API_KEY": KEY}), Reach)
    # not allowed wins: the agent could not use it whatever the operator sets
    far = decide(found, (), {})
    assert isinstance(far, CallRefused) and far.code == "endpoint_not_allowed"


def test_the_shown_url_drops_query_fragment_and_credentials() -> None:
    assert (
        shown_url("https://u:p@api.test:8443/v1/run?key=s3cret#f") == "https://api.test:8443/v1/run"
    )
    assert shown_url("http://[::1]:9/x") == "http://[::1]:9/x"


def test_the_request_body_is_the_capability_and_the_input() -> None:
    body = request_body("chat.reply", 'say "hi"\n')
    assert json.loads(body) == {"capability": "chat.reply", "input": 'say "hi"\n'}
    assert msgspec.json.decode(body, type=HttpAdapterRequest).input == 'say "hi"\n'


# --- how the reply reads ------------------------------------------------------------------


def reply(status: int = 200, body: bytes = b"", content_type: str = "text/plain", **kw: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "status": status,
        "content_type": content_type,
        "content_encoding": "",
        "body": body,
        "cut": False,
        "cap": 64,
        "secret": "",
    }
    return http_reply(**{**args, **kw})  # type: ignore[arg-type]


def test_a_2xx_reply_is_the_output_json_rendered_compactly() -> None:
    got = reply(200, b'{\n  "a": [1, 2],\n  "b": "\xc3\xa9"\n}', "application/json; charset=utf-8")
    assert (got.output, got.status, got.error, got.truncated) == (
        '{"a":[1,2],"b":"é"}',
        200,
        None,
        False,
    )
    assert reply(201, b'{"x": 1}', "application/problem+json").output == '{"x":1}'
    assert reply(200, b"not json {", "application/json").output == "not json {"
    assert reply(204).output == "" and reply(204).error is None


def test_text_is_decoded_by_its_charset() -> None:
    assert reply(200, "é".encode("latin-1"), "text/plain; charset=latin-1").output == "é"
    assert reply(200, b"\xff ok", "text/plain").output == "\ufffd ok"
    assert reply(200, b"ok", "text/plain; charset=no-such-codec").output == "ok"


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (301, False),
        (302, False),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (409, False),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (599, True),
    ],
)
def test_a_status_other_than_2xx_is_http_status_retryable_only_for_429_and_5xx(
    status: int, retryable: bool
) -> None:
    got = reply(status, b'{"error": "no"}', "application/json")
    assert (got.error, got.status, got.retryable) == ("http_status", status, retryable)
    assert got.output == '{"error":"no"}' and got.detail.startswith(f"HTTP {status}")
    assert ("not followed" in got.detail) is (300 <= status <= 399)
    assert adapter_retryable("http_status", status) is retryable is http_status_retryable(status)


def test_an_encoded_reply_is_not_read() -> None:
    got = reply(200, b"\x1f\x8b...", content_encoding="gzip")
    assert (got.error, got.retryable, got.output) == ("http_bad_reply", False, "")
    assert reply(200, b"ok", content_encoding="identity").output == "ok"


def test_the_output_is_capped_and_says_so() -> None:
    got = reply(200, b"x" * 65, cap=64)
    assert (len(got.output), got.truncated) == (64, True)
    cut = reply(200, b"x" * 64, cut=True, cap=64)
    assert cut.truncated
    exact = reply(200, b"x" * 64, cap=64)
    assert (len(exact.output), exact.truncated) == (64, False)
    # JSON cut short is shown as the text it is, a character cut in half left out
    assert (
        reply(200, b'{"a": "' + "é".encode() * 40, "application/json", cap=10).output == '{"a": "é'
    )


def test_no_reply_is_retryable_and_names_no_token() -> None:
    got = no_reply("http_unavailable", f"cannot reach x: {KEY} refused", KEY)
    assert (got.error, got.retryable, got.status) == ("http_unavailable", True, 0)
    assert KEY not in got.detail
    assert adapter_retryable("http_timeout") and adapter_retryable("http_unavailable")
    assert not adapter_retryable("http_bad_reply")
    assert not no_reply("http_unavailable", "bad url", retryable=False).retryable


def test_an_echoed_token_is_cut_out_of_output_and_detail() -> None:
    body = f"you sent Bearer {KEY}".encode()
    for status in (200, 401, 500):
        got = reply(status, body, secret=KEY)
        assert KEY not in got.output and KEY not in got.detail
        assert "<redacted>" in got.output
    escaped = json.dumps({"k": "".join(f"\\u{ord(c):04x}" for c in KEY)}).replace("\\\\", "\\")
    got = reply(200, escaped.encode(), "application/json", secret=KEY, cap=4096)
    assert json.loads(got.output) == {"k": "<redacted>"}


@given(
    before=st.binary(max_size=80),
    after=st.binary(max_size=80),
    copies=st.integers(0, 3),
    cap=st.integers(1, 200),
)
def test_a_token_never_reaches_the_output_wherever_the_cap_cuts(
    before: bytes, after: bytes, copies: int, cap: int
) -> None:
    """What the runner does: read at most `read_limit` bytes (more: `cut`), then reply."""
    token = KEY.encode()
    whole = before + (token + after) * copies
    limit = read_limit(cap, KEY)
    got = reply(200, whole[:limit], cut=len(whole) > limit, cap=cap, secret=KEY)
    assert KEY not in got.output
    assert len(got.output.encode()) <= cap * 3  # replacement characters are 3 bytes
    # and no start of it is left at the end of a body that was cut
    assert not any(got.output.endswith(KEY[:n]) for n in range(8, len(KEY)))


@given(st.binary(max_size=200), st.booleans())
def test_scrub_never_leaves_the_token_and_keeps_what_is_not_it(data: bytes, cut: bool) -> None:
    token = KEY.encode()
    out = scrub(data, KEY, cut)
    assert token not in out
    if token[:1] not in data:
        assert out == data


def test_render_body_knows_json_media_types() -> None:
    assert render_body("application/vnd.api+json", b'{ "a" : 1 }', False) == '{"a":1}'
    assert render_body("text/json", b'{ "a" : 1 }', False) == '{ "a" : 1 }'  # not a JSON type
    assert render_body("application/json", b'{ "a" : 1 }', True) == '{ "a" : 1 }'
