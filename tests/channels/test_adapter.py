"""What every adapter shares: its kept state written whole or not at all (Telegram's offset
and pins, Matrix's token and turns taken), on a real full disk (a tmpfs of one page; the
mount is a process: `tests.tmpfs` puts a module in the integration layer)."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from tests.tmpfs import tiny_tmpfs
from zeroclaw.channels import ChannelStartFailed
from zeroclaw.channels._adapter import write_state


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    with tiny_tmpfs(tmp_path / "disk", "4k") as disk:
        yield disk


async def test_a_state_is_written_in_a_directory_of_the_daemons_user_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "channels" / "matrix" / "home" / "state.json"
    await write_state("matrix.home", path, b'{"next_batch":"s1"}')
    assert path.read_bytes() == b'{"next_batch":"s1"}'
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_full_disk_keeps_the_last_state_and_says_so(full_disk: Path) -> None:
    path = full_disk / "state.json"
    await write_state("telegram.chat", path, b"{}")
    with pytest.raises(ChannelStartFailed, match=r"telegram.chat: cannot write .*disk is full"):
        await write_state("telegram.chat", path, b"x" * 64_000)
    assert path.read_bytes() == b"{}"
    left = [p.name for p in await trio.Path(full_disk).iterdir()]
    assert left == ["state.json"]  # no temporary file left
