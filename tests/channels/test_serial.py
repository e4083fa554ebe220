"""The serial channel on real pseudo-terminals: the adapter opens a path (a symlink to a pty's
slave, re-pointed when the "device" comes back) as its device; the test is the device at the
master end. A real ChannelHost on the turns bench, alpha (supervised) owning serial.desk and
a peer group accepting `serial:desk`."""

from __future__ import annotations

import errno
import os
import tty
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import PATIENCE
from tests.conversations.helpers import bench
from zeroclaw.channels import ChannelHost, ChannelStartFailed, SerialAdapter
from zeroclaw.config import ConfigError, SerialChannel, validate_document
from zeroclaw.conversations import Decided, OperatorApprovals
from zeroclaw.events import ApprovalRequested, EventSink


class Device:
    """A pty's master end; `path` (a symlink) names its slave, as a device path would."""

    def __init__(self, path: Path) -> None:
        self.master, slave = os.openpty()
        tty.setraw(slave)
        name = os.ttyname(slave)
        os.close(slave)  # the adapter opens it by name
        os.set_blocking(self.master, False)
        tmp = path.with_suffix(".new")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(name)
        tmp.replace(path)  # atomically: the path names this pty from now on
        self._buf = b""

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.master, view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.master)

    async def line(self) -> str:
        """The next line the adapter wrote (raw bytes decoded; "\\n" framing)."""
        while b"\n" not in self._buf:
            try:
                chunk = os.read(self.master, 65536)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.master)
                continue
            except OSError as exc:  # EIO: the adapter closed its end
                assert exc.errno == errno.EIO
                raise EOFError from exc
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode()

    async def lines(self, n: int) -> list[str]:
        return [await self.line() for _ in range(n)]

    def close(self) -> None:
        if self.master >= 0:
            os.close(self.master)
            self.master = -1


def with_serial(port: Path, **settings: Any) -> Any:
    def configure(doc: dict[str, Any]) -> None:
        doc["channels"]["serial"] = {"desk": {"port": str(port), **settings}}
        doc["agents"]["alpha"]["channels"] = ["cli.local", "serial.desk"]
        doc["peer_groups"]["desk"] = {
            "channel": "serial.desk",
            "agents": ["alpha"],
            "external_peers": ["serial:desk"],
            # These tests pin the sender's own approval path: granted explicitly (by
            # default no tool, and every approval goes to the operator, ADR 0042).
            "tools": ["file_write", "file_read", "memory_store", "memory_recall"],
            "approvals": "sender",
        }

    return configure


@asynccontextmanager
async def serial_bench(
    tmp_path: Path,
    *,
    approval_timeout: float = 5.0,
    approvals: OperatorApprovals | None = None,
    **settings: Any,
) -> AsyncIterator[tuple[SerialAdapter, Device]]:
    """`approvals`: the operator's queue, and the group's approvals left to the default
    (the operator answers); without it the sender answers its own prompts."""
    port = tmp_path / "ttyDESK"
    device = Device(port)
    configure = with_serial(port, **settings)

    def to_operator(doc: dict[str, Any]) -> None:
        configure(doc)
        del doc["peer_groups"]["desk"]["approvals"]

    async with bench(tmp_path, configure=configure if approvals is None else to_operator) as b:
        await b.agent(tmp_path)
        host = ChannelHost(
            b.service,
            lambda: b.router.policy,
            approval_timeout=approval_timeout,
            approvals=approvals,
        )
        config = SerialChannel(port=str(port), **settings)  # what the config file says
        adapter = SerialAdapter("desk", config, backoff_first=0.02, backoff_cap=0.2)
        await b.nursery.start(adapter.serve, host)
        await adapter.wait_open()
        with trio.fail_after(PATIENCE):
            yield adapter, device
    device.close()


async def test_a_line_in_gets_the_owners_reply_out(tmp_path: Path) -> None:
    async with serial_bench(tmp_path) as (adapter, device):
        await device.send(b"hello there\n")
        reply = await device.line()
        assert "alpha" in reply
        assert adapter.keys == ("serial.desk",)


async def test_crlf_newline_frames_output_lines(tmp_path: Path) -> None:
    async with serial_bench(tmp_path, newline="\r\n") as (_adapter, device):
        await device.send(b"hello\r\n")
        assert (await device.line()).endswith("\r")


async def test_the_device_goes_away_and_comes_back(tmp_path: Path) -> None:
    async with serial_bench(tmp_path) as (adapter, first):
        await first.send(b"hello\n")
        before = await first.line()
        first.close()  # unplugged
        again = Device(tmp_path / "ttyDESK")  # plugged back in: a new pty at the same path
        await adapter.wait_open(2)
        await again.send(b"hello\n")
        assert await again.line() == before
        again.close()


async def test_a_serial_senders_yes_cannot_answer_an_approval_the_operator_holds(
    tmp_path: Path,
) -> None:
    sink = EventSink()
    queue = OperatorApprovals(sink)
    with sink.subscribe() as subscription:
        events = aiter(subscription)
        async with serial_bench(tmp_path, approvals=queue, approval_timeout=600) as (_, device):
            await device.send(b"write note.txt: hi\n")
            while not isinstance((await anext(events)).event, ApprovalRequested):
                pass
            await device.send(b"y\n")  # no prompt was written: this is a new message
            [pending] = queue.pending()
            assert pending.channel == "serial.desk" and pending.sender == "serial:desk"
            assert isinstance(queue.decide(pending.id, False), Decided)
            denied = await device.line()
            assert denied.startswith("file_write refused: approval_denied"), denied
            assert "heard: y" in await device.line()  # the "y" was only ever a message
        await events.aclose()  # type: ignore[attr-defined]
    assert not (tmp_path / "ws" / "note.txt").exists()


async def test_unplugged_while_a_prompt_waits_denies_and_serves_on(tmp_path: Path) -> None:
    async with serial_bench(tmp_path) as (adapter, first):
        await first.send(b"write note.txt: hi\n")
        assert (await first.line()).startswith("approve ")
        first.close()
        again = Device(tmp_path / "ttyDESK")
        await adapter.wait_open(2)
        await again.send(b"y\n")  # a new device, a new message: not the old prompt's answer
        assert "alpha" in await again.line()
        assert not (tmp_path / "ws" / "note.txt").exists()
        again.close()


async def test_an_unplugged_device_is_waited_for(tmp_path: Path) -> None:
    async with serial_bench(tmp_path) as (adapter, first):
        first.close()
        (tmp_path / "ttyDESK").unlink()  # gone for a while: reopening fails, with backoff
        await adapter.wait_lost(failed_opens=4)  # retried with backoff, up to 0.2 s apart
        assert not adapter.connected and adapter.opened == 1
        again = Device(tmp_path / "ttyDESK")
        await adapter.wait_open(2)
        await again.send(b"hi\n")
        assert "alpha" in await again.line()
        again.close()


async def test_a_megabyte_without_newline_is_dropped_and_the_channel_lives(
    tmp_path: Path,
) -> None:
    async with serial_bench(tmp_path) as (adapter, device):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(device.send, b"z" * (1 << 20) + b"\nhello\n")
            diagnostic = await device.line()
            assert diagnostic == "error too_large: dropped an input line over 4096 bytes"
            assert "alpha" in await device.line()
        assert adapter.dropped_lines == 1


async def test_invalid_utf8_is_replaced_and_the_channel_lives(tmp_path: Path) -> None:
    async with serial_bench(tmp_path) as (_adapter, device):
        await device.send(b"write bad.txt: caf\xff\xfe\n")
        prompt = await device.line()
        assert prompt.startswith("approve ") and prompt.endswith("write bad.txt [y/N]")
        await device.send(b"yes\n")
        await device.line()
        assert (tmp_path / "ws" / "bad.txt").read_text() == "caf\ufffd\ufffd"
        await device.send(b"hello\n")
        assert "alpha" in await device.line()


async def test_an_approval_prompt_answered_y_runs_the_action(tmp_path: Path) -> None:
    async with serial_bench(tmp_path) as (_adapter, device):
        await device.send(b"write note.txt: hi\n")
        prompt = await device.line()
        assert prompt.startswith("approve ") and prompt.endswith("? write note.txt [y/N]")
        await device.send(b"y\n")
        reply = await device.line()
        assert "refused" not in reply, reply
        assert (tmp_path / "ws" / "note.txt").read_text() == "hi"


async def test_an_unanswered_prompt_denies_and_the_next_line_is_a_message(
    tmp_path: Path,
) -> None:
    async with serial_bench(tmp_path, approval_timeout=0.3) as (_adapter, device):
        await device.send(b"write note.txt: hi\n")
        assert (await device.line()).startswith("approve ")
        assert "approval_denied" in await device.line()  # silence: the reply says denied
        assert not (tmp_path / "ws" / "note.txt").exists()
        await device.send(b"y\n")  # too late: a new message, not an answer
        assert "alpha" in await device.line()
        assert not (tmp_path / "ws" / "note.txt").exists()


async def test_any_answer_but_yes_denies(tmp_path: Path) -> None:
    async with serial_bench(tmp_path) as (_adapter, device):
        await device.send(b"write note.txt: hi\n")
        assert (await device.line()).startswith("approve ")
        await device.send(b"sure\n")
        assert "approval_denied" in await device.line()
        assert not (tmp_path / "ws" / "note.txt").exists()


async def test_two_replies_never_interleave(tmp_path: Path) -> None:
    async with serial_bench(tmp_path) as (_adapter, device):
        for name in "ab":
            text = "\n".join(f"{name}{i}" for i in range(200))
            (tmp_path / "ws" / f"{name}.txt").write_text(text)
        await device.send(b"read a.txt\nread b.txt\n")
        out = await device.lines(400)
        assert out == [f"a{i}" for i in range(200)] + [f"b{i}" for i in range(200)]


async def test_two_devices_serve_side_by_side(tmp_path: Path) -> None:
    """Each adapter runs its own asyncio loop on the bridge; two run in one trio run."""
    devices = {alias: Device(tmp_path / f"tty-{alias}") for alias in ("desk", "lab")}

    def configure(doc: dict[str, Any]) -> None:
        doc["channels"]["serial"] = {a: {"port": str(tmp_path / f"tty-{a}")} for a in devices}
        doc["agents"]["alpha"]["channels"] = ["cli.local", "serial.desk", "serial.lab"]
        for a in devices:
            doc["peer_groups"][a] = {
                "channel": f"serial.{a}",
                "agents": ["alpha"],
                "external_peers": [f"serial:{a}"],
                # These tests pin the sender's own approval path: granted explicitly (by
                # default no tool, and every approval goes to the operator, ADR 0042).
                "tools": ["file_write", "file_read", "memory_store", "memory_recall"],
                "approvals": "sender",
            }

    async with bench(tmp_path, configure=configure) as b:
        await b.agent(tmp_path)
        host = ChannelHost(b.service, lambda: b.router.policy)
        for alias in devices:
            adapter = SerialAdapter(alias, SerialChannel(port=str(tmp_path / f"tty-{alias}")))
            await b.nursery.start(adapter.serve, host)
            await adapter.wait_open()
        with trio.fail_after(PATIENCE):
            for device in devices.values():
                await device.send(b"hello\n")
            for device in devices.values():
                assert "alpha" in await device.line()
        assert host.counts(("serial.desk",)) == host.counts(("serial.lab",)) == (1, {})
    for device in devices.values():
        device.close()


async def test_a_device_that_never_opens_fails_to_start(tmp_path: Path) -> None:
    async with bench(tmp_path, configure=with_serial(tmp_path / "nothing")) as b:
        host = ChannelHost(b.service, lambda: b.router.policy)
        adapter = SerialAdapter("desk", SerialChannel(port=str(tmp_path / "nothing")))
        with pytest.raises(ChannelStartFailed, match="cannot open"):
            await b.nursery.start(adapter.serve, host)
        assert not adapter.connected


# --------------------------------------------------------------------------- config


def test_serial_settings_default_and_validate() -> None:
    config = SerialChannel(port="/dev/ttyUSB0")
    assert (config.newline, config.max_line_bytes, config.encoding) == ("\n", 4096, "utf-8")
    assert SerialChannel(port="/dev/x", newline="\r\n", encoding="latin-1").newline == "\r\n"
    for bad in ({"newline": "\r"}, {"encoding": "klingon"}, {"encoding": "rot13"}):
        with pytest.raises(ValueError, match=r"newline|encoding"):
            SerialChannel(port="/dev/x", **bad)


def test_two_serial_channels_on_one_device_is_an_error(tmp_path: Path) -> None:
    def configure(doc: dict[str, Any]) -> None:
        doc["channels"]["serial"] = {
            "desk": {"port": "/dev/ttyUSB0"},
            "lab": {"port": "/dev/../dev/ttyUSB0"},
            "bench": {"port": "/dev/ttyUSB1"},
        }

    from tests.supervisor.harness import agent_entry, make_config

    doc = make_config(tmp_path, {"alpha": agent_entry()})
    configure(doc)
    with pytest.raises(ConfigError) as info:
        validate_document(doc)
    found = {issue.key: issue.message for issue in info.value.issues}
    assert list(found) == ["channels.serial.lab.port"], found
    assert "channels.serial.desk" in found["channels.serial.lab.port"]
