"""The channel tests' shared homeserver: one real Synapse per test worker (issue 30)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.channels.synapse import Homeserver, synapse_session


@pytest.fixture(scope="session")
def homeserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Homeserver]:
    """Started once per worker (start-up takes 10-20 s), stopped at the session's end."""
    yield from synapse_session(tmp_path_factory.mktemp("synapse"))
