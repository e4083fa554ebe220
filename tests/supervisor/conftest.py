from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.supervisor.harness import Daemon, remove_root, short_root


@pytest.fixture
def root() -> Iterator[Path]:
    path = short_root()
    yield path
    remove_root(path)


@pytest.fixture
def daemons(root: Path) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def make(doc: dict[str, Any], **kwargs: Any) -> Daemon:
        daemon = Daemon(root, doc, **kwargs)
        started.append(daemon)
        return daemon

    yield make
    for daemon in started:
        daemon.stop()
