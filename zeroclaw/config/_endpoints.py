"""Which network endpoints a risk profile lets its agents reach: `allowed_endpoints`, a list
of `host:port`, against the URL of an HTTP MCP server (ADR 0053) or of an HTTP adapter
(ADR 0054). Pure.

An endpoint is the host as the URL writes it, lowercased (an IPv6 literal without its
brackets), and its port: the URL's own, else its scheme's (http 80, https 443). Names are
compared as written, never resolved: `localhost` is not `127.0.0.1`. A URL that is not
http(s), has no host, or has a port out of range reaches no endpoint at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

SCHEME_PORTS = {"http": 80, "https": 443}


def endpoint_key(url: str) -> str | None:
    """The `host:port` `url` connects to, or None when it is not an http(s) URL with a
    host and a valid port."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:  # a port that is not a number, or out of range
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in SCHEME_PORTS or not host:
        return None
    if port is None:
        port = SCHEME_PORTS[scheme]
    if not 0 < port < 65536:
        return None
    return f"{host}:{port}"


def normal_endpoint(entry: str) -> str:
    """An `allowed_endpoints` entry as `endpoint_key` spells endpoints: the host
    lowercased, an IPv6 literal's brackets dropped."""
    host, _, port = entry.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return f"{host.lower()}:{port}"


def endpoint_allowed(url: str, allowed: Iterable[str]) -> bool:
    """Whether `url` reaches an endpoint that `allowed` (a profile's allowed_endpoints)
    lists; a URL that reaches no endpoint is never allowed."""
    key = endpoint_key(url)
    return key is not None and key in {normal_endpoint(entry) for entry in allowed}
