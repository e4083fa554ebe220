from __future__ import annotations

import copy
import functools
import os
import re
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parent.parent
DEMO_CONFIG = REPO / "etc" / "zeroclaw.toml"

# The deadline of every wait on an event or a condition (a daemon ready, a line printed, a
# process gone): only a hang should reach it, never a loaded machine (issue 25: the suite
# runs green while two CPU-bound processes compete for its two cores).
PATIENCE = 120.0

# A suite started in the background (`cmd &` in a script, nohup, a CI runner's job) inherits
# SIGINT ignored, and exec keeps an ignored signal ignored: every CLI the tests start would
# then ignore the Ctrl-C the tests press (a chat's turn, a follow), and wait its timeout out.
# Python's own default, restored here, is what a terminal user's process has.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Hypothesis times each example (200 ms by default) and checks that generating data is not
# "too slow": both are clocks a loaded machine beats. Property tests pin what holds, not speed.
settings.register_profile("zeroclaw", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("zeroclaw")

VALID_DOC: dict[str, Any] = {
    "daemon": {"state_dir": "state", "runtime_dir": "run"},
    "providers": {"offline": {"default": {}}},
    "risk_profiles": {"sup": {"level": "supervised"}, "full": {"level": "full"}},
    "runtime_profiles": {"default": {}},
    "channels": {
        "cli": {"local": {}},
        "webhook": {"ops": {"listen": "127.0.0.1:8787", "secret_env": "HOOK_SECRET"}},
    },
    "agents": {
        "alpha": {
            "model_provider": "offline.default",
            "risk_profile": "sup",
            "runtime_profile": "default",
            "channels": ["cli.local", "webhook.ops"],
            "delegates": ["beta"],
            "workspace": {"path": "ws/alpha", "access": {"beta": "read"}},
            "memory": {"read_memory_from": ["beta"]},
        },
        "beta": {
            "model_provider": "offline.default",
            "risk_profile": "sup",
            "runtime_profile": "default",
            "channels": ["cli.local"],
            "workspace": {"path": "ws/beta"},
        },
    },
    "peer_groups": {"ops": {"channel": "cli", "agents": ["alpha", "beta"]}},
}


@pytest.fixture
def doc() -> dict[str, Any]:
    """A valid config document each test may break in exactly one way."""
    return copy.deepcopy(VALID_DOC)


# --- real daemons (tests/supervisor/harness.py), for every test directory -----------------


@pytest.fixture
def root() -> Iterator[Path]:
    from tests.supervisor import harness  # imported late: the harness imports this module

    path = harness.short_root()
    yield path
    harness.remove_root(path)


@pytest.fixture
def daemons(root: Path) -> Iterator[Callable[..., Any]]:
    from tests.supervisor import harness

    started: list[Any] = []

    def make(doc: dict[str, Any], **kwargs: Any) -> Any:
        daemon = harness.Daemon(root, doc, **kwargs)
        started.append(daemon)
        return daemon

    yield make
    for daemon in started:
        daemon.stop()
    # Issue 14: whatever the test did, at log_level debug, no known secret reached a log.
    from tests.known_secrets import assert_no_secret_logged

    for log in dict.fromkeys(daemon.log_path for daemon in started):
        assert_no_secret_logged(log)


# --- a real directory tree with real symlinks (policy and tool tests) ----------------------


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for ws in ("alpha", "beta", "gamma"):
        (root / "ws" / ws).mkdir(parents=True)
        (root / "ws" / ws / "file").write_text(ws)
    (root / "outside").mkdir()
    (root / "outside" / "secret.txt").write_text("secret")
    (root / "outside" / "forbidden").mkdir()
    (root / "outside" / "forbidden" / "key").write_text("key")
    alpha = root / "ws" / "alpha"
    (alpha / "notes.txt").write_text("mine")
    (alpha / "sub").mkdir()
    links = {
        "link_out": "../../outside/secret.txt",
        "chain1": "chain2",
        "chain2": "sub/chain3",
        "sub/chain3": "../../../outside",
        "link_beta": "../beta/file",
        "link_gamma": "../gamma",
        "link_forbidden": str(root / "outside" / "forbidden" / "key"),
        "dangling_out": "/nonexistent-zc/x",
        "link_self": "notes.txt",
    }
    for name, target in links.items():
        os.symlink(target, alpha / name)
    return root


# --- a local server speaking a model provider's protocol (tests/providers) -----------------


@pytest.fixture
async def server() -> AsyncIterator[Any]:
    """A ScriptedServer on loopback; tests append its answers."""
    from tests.providers.protocol_server import ScriptedServer

    server = ScriptedServer([])
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        yield server
        nursery.cancel_scope.cancel()


# --- layers: what `make test-fast` runs, and the order `make test` runs in ---------------
#
# A test module is `integration` when it starts processes (a daemon, the CLI, a probe, a
# pseudo-terminal) - told from what its source uses, so a new module is sorted without a
# marker to remember - or when one of its tests asks for a daemon fixture. The rest, the
# sans-IO cores, policy, config, wire and in-process trio tests, is the fast layer
# (`-m "not integration"`). The fast layer runs first, so the suite reports progress from
# its first seconds instead of starting with minutes of daemon tests.

# homeserver: a Synapse; world: the conformance daemon
PROCESS_FIXTURES = frozenset({"root", "daemons", "homeserver", "world"})
# What a module that starts processes uses (directly or through a test helper that does).
PROCESS_WORDS = re.compile(
    r"\bsubprocess\b|\bpexpect\b|\bDaemon\b|\brun_process\b|\bopen_process\b|\bPopen\b"
    r"|\brun_cli\b|\bos\.fork\b|\bmultiprocessing\b|tests\.discovery\.helpers|tests\.tmpfs"
    r"|\bstart_agent\b|\bspawn\b"
)


@functools.cache
def _starts_processes(path: str) -> bool:
    try:
        return bool(PROCESS_WORDS.search(Path(path).read_text()))
    except OSError:
        return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules: dict[str, bool] = {}
    for item in items:
        path = str(item.path)
        uses = PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        modules[path] = modules.get(path, False) or bool(uses) or _starts_processes(path)
    for item in items:
        if modules[str(item.path)]:
            item.add_marker(pytest.mark.integration)
    # Stable, by whole modules: every xdist worker computes the same order, and a module's
    # module-scoped fixtures are set up once.
    items.sort(key=lambda item: modules[str(item.path)])
