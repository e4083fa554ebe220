"""The environments of what the daemon starts: the zygote's block, every agent's os.environ,
the allowlisted part of the daemon's own. Light on purpose: the zygote is started with it
before the daemon has loaded anything else (ADR 0067)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._notify import SYSTEMD_VARIABLES

if TYPE_CHECKING:
    from ..agent import AgentSpec

# Variables an agent process may inherit from the daemon. Everything else is dropped:
# systemd's NOTIFY_SOCKET / WATCHDOG_* above all, and secrets the agent is not bound to.
ENV_ALLOWLIST = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
    }
)
_LOCALE = re.compile(r"^LC_[A-Z_]+$")



def scrubbed_environment(daemon_env: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted part of the daemon's environment: no secrets, nothing of systemd's."""
    return {
        key: value
        for key, value in daemon_env.items()
        if (key in ENV_ALLOWLIST or _LOCALE.match(key)) and key not in SYSTEMD_VARIABLES
    }


def zygote_environment(daemon_env: Mapping[str, str]) -> dict[str, str]:
    """The zygote's environment block, which every agent's /proc/self/environ will show.
    PYTHONPATH is kept so the zygote imports the same code the daemon runs."""
    env = scrubbed_environment(daemon_env)
    if "PYTHONPATH" in daemon_env:
        env["PYTHONPATH"] = daemon_env["PYTHONPATH"]
    return env


def agent_environment(spec: AgentSpec, daemon_env: Mapping[str, str]) -> dict[str, str]:
    """The agent's os.environ: the allowlist plus the secrets it is bound to."""
    env = scrubbed_environment(daemon_env)
    for name in spec.secret_env:
        if name in daemon_env and name not in SYSTEMD_VARIABLES:
            env[name] = daemon_env[name]
    env["ZEROCLAW_AGENT"] = spec.alias
    return env
