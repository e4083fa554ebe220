"""Which endpoint a URL reaches, and whether a risk profile's `allowed_endpoints` lists it
(ADRs 0053, 0054): pure, over every spelling that matters."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroclaw.config import endpoint_allowed, endpoint_key
from zeroclaw.config._endpoints import normal_endpoint


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://127.0.0.1:8080/run", "127.0.0.1:8080"),
        ("http://127.0.0.1/run", "127.0.0.1:80"),  # the scheme's port
        ("https://api.example.test", "api.example.test:443"),
        ("HTTPS://API.Example.TEST:8443/x?y=1#z", "api.example.test:8443"),
        ("http://[::1]:9000/mcp", "::1:9000"),  # an IPv6 literal without its brackets
        ("http://[::1]/", "::1:80"),
        ("http://user:pass@host.test:81/", "host.test:81"),  # credentials: the host still
        ("  http://padded.test:82  ", "padded.test:82"),
        ("ftp://files.test/", None),  # not http(s)
        ("file:///etc/passwd", None),
        ("http:///no-host", None),
        ("http://host.test:0/", None),
        ("http://host.test:65536/", None),
        ("http://host.test:port/", None),
        ("127.0.0.1:8080", None),  # no scheme at all
        ("", None),
    ],
)
def test_endpoint_key_is_host_and_port_as_written(url: str, key: str | None) -> None:
    assert endpoint_key(url) == key


@pytest.mark.parametrize(
    ("url", "allowed", "ok"),
    [
        ("http://127.0.0.1:8080/a", ("127.0.0.1:8080",), True),
        ("http://127.0.0.1:8080/a", ("127.0.0.1:8081",), False),  # another port
        ("http://127.0.0.1:8080/a", ("localhost:8080",), False),  # names are not resolved
        ("http://localhost:8080/a", ("127.0.0.1:8080",), False),
        ("https://api.test/v1", ("api.test:443",), True),
        ("https://api.test/v1", ("api.test:80",), False),  # https is 443
        ("http://api.test/v1", ("api.test:443",), False),
        ("http://API.test:1/", ("api.TEST:1",), True),  # hosts compare case-insensitively
        ("http://[::1]:9/", ("[::1]:9",), True),  # bracketed or not
        ("http://[::1]:9/", ("::1:9",), True),
        ("http://evil.test/?next=api.test:443", ("api.test:443",), False),
        ("http://api.test.evil.test/", ("api.test:80",), False),
        ("http://api.test@evil.test/", ("api.test:80",), False),  # userinfo is not the host
        ("ftp://api.test:21/", ("api.test:21",), False),
        ("http://api.test/", (), False),  # nothing listed: nothing allowed
    ],
)
def test_endpoint_allowed_only_for_a_listed_host_and_port(
    url: str, allowed: tuple[str, ...], ok: bool
) -> None:
    assert endpoint_allowed(url, allowed) is ok


HOSTS = st.sampled_from(["127.0.0.1", "localhost", "api.example.test", "::1", "Mixed.Case.Test"])
PORTS = st.integers(1, 65535)


def _url(scheme: str, host: str, port: int | None, path: str) -> str:
    literal = f"[{host}]" if ":" in host else host
    return f"{scheme}://{literal}{'' if port is None else f':{port}'}{path}"


@given(
    scheme=st.sampled_from(["http", "https"]),
    host=HOSTS,
    port=st.none() | PORTS,
    path=st.sampled_from(["", "/", "/v1/run", "/x?port=1#frag"]),
    listed=st.lists(st.tuples(HOSTS, PORTS), max_size=4),
)
def test_allowed_exactly_when_the_profile_lists_that_host_and_port(
    scheme: str, host: str, port: int | None, path: str, listed: list[tuple[str, int]]
) -> None:
    url = _url(scheme, host, port, path)
    effective = port if port is not None else {"http": 80, "https": 443}[scheme]
    allowed = tuple(f"{h}:{p}" for h, p in listed)
    expected = (host.lower(), effective) in {(h.lower(), p) for h, p in listed}
    assert endpoint_allowed(url, allowed) is expected
    # listing the endpoint is always enough, whatever else is listed
    assert endpoint_allowed(url, (*allowed, f"{host}:{effective}"))


@given(st.text(max_size=60))
def test_no_string_reaches_an_endpoint_unless_it_is_an_http_url(text: str) -> None:
    key = endpoint_key(text)
    if key is not None:
        assert text.strip().lower().startswith(("http://", "https://"))
        assert normal_endpoint(key) == key
