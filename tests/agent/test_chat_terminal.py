"""Interactive `zeroclaw --agent alpha chat` on a real pseudo-terminal, through the daemon."""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Callable
from pathlib import Path

import pexpect

from tests.agent.test_chat_inprocess import config
from tests.conftest import PATIENCE, REPO
from tests.supervisor.harness import Daemon, wait_for_process

DaemonFactory = Callable[..., Daemon]
PROMPT = "alpha> "


def spawn_chat(daemon: Daemon, root: Path) -> pexpect.spawn:
    """`zeroclaw --agent alpha chat` on a new pseudo-terminal."""
    argv = daemon.cli_argv()
    return pexpect.spawn(
        argv[0],
        [*argv[1:], "--agent", "alpha", "chat"],
        cwd=str(REPO),
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "XDG_STATE_HOME": str(root / "xdg"),
            "TERM": "dumb",
        },
        encoding="utf-8",
        timeout=PATIENCE,  # each expect: a loaded machine answers late, not never
    )


def test_a_terminal_session(root: Path, daemons: DaemonFactory) -> None:
    doc = config(root)
    doc["risk_profiles"]["sup"]["allowed_commands"] = ["ls", "sleep"]
    daemon = daemons(doc, faults=False).start()
    child = spawn_chat(daemon, root)
    try:
        child.expect_exact(PROMPT)
        # A line typed, a streamed answer (longer than one delta).
        child.sendline("remember: the deploy window opens at nine on tuesday mornings")
        child.expect_exact("[memory_store: ok]")
        child.expect_exact("Remembered as the-deploy-window-opens-")
        child.expect_exact(PROMPT)
        child.sendline("recall deploy window")
        child.expect_exact("the deploy window opens at nine on tuesday mornings")
        child.expect_exact(PROMPT)

        # A supervised write asks inline; "n" is a denial.
        child.sendline("write notes.txt: hi")
        child.expect_exact("approve: write notes.txt?")
        child.sendline("n")
        child.expect_exact("[file_write: approval_denied]")
        child.expect_exact(PROMPT)
        child.sendline("write notes.txt: hi")
        child.expect_exact("approve: write notes.txt?")
        child.sendline("y")
        child.expect_exact("[file_write: ok]")
        child.expect_exact(PROMPT)
        notes = root / "state" / "agents" / "alpha" / "workspace" / "notes.txt"
        assert notes.read_text() == "hi"

        # Ctrl-C during a turn cancels that turn (and kills its command), not the session.
        child.sendline("run sleep 30")
        child.expect_exact("approve: run: sleep 30?")
        child.sendline("y")
        sleeper = wait_for_process(["sleep", "30"], under=daemon.agent("alpha")["pid"])
        child.sendintr()
        child.expect_exact("[cancelled]")
        child.expect_exact(PROMPT)
        assert _gone(sleeper)

        # Ctrl-C at the prompt is a fresh prompt; Ctrl-D leaves.
        child.sendintr()
        child.expect_exact(PROMPT)
        child.sendline("hello")
        child.expect_exact("Hello, I am alpha.")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before
    history = root / "xdg" / "zeroclaw" / "chat_history"
    assert "recall deploy window" in history.read_text()
    assert stat.S_IMODE(history.stat().st_mode) == 0o600


def _gone(pid: int) -> bool:
    from tests.supervisor.harness import wait_gone

    return not wait_gone([pid], timeout=PATIENCE)


def test_a_terminal_session_without_a_daemon(root: Path, daemons: DaemonFactory) -> None:
    daemon = daemons(config(root), faults=False)  # configured, never started
    child = spawn_chat(daemon, root)
    try:
        child.expect(r"running alpha in-process (under Landlock|without a sandbox) with the store")
        child.expect_exact(PROMPT)
        child.sendline("ask beta: hi")
        child.expect_exact("[send_message_to_peer: unavailable]")
        child.expect_exact(PROMPT)
        child.sendline("write notes.txt: from the terminal")
        child.expect_exact("approve: write notes.txt?")
        child.sendline("y")
        child.expect_exact("[file_write: ok]")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before
    notes = root / "state" / "agents" / "alpha" / "workspace" / "notes.txt"
    assert notes.read_text() == "from the terminal"


def test_the_session_ends_with_exit_3_when_the_daemon_goes(
    root: Path, daemons: DaemonFactory
) -> None:
    daemon = daemons(config(root), faults=False).start()
    child = spawn_chat(daemon, root)
    try:
        child.expect_exact(PROMPT)
        child.sendline("hello")
        child.expect_exact("Hello, I am alpha.")
        child.expect_exact(PROMPT)
        daemon.signal(signal.SIGTERM)
        assert daemon.wait_exit() == 0
        child.sendline("hello again")
        child.expect_exact("zeroclaw: ")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 3, child.before


def test_an_unanswered_approval_is_denied_at_the_profiles_timeout_and_a_late_yes_is_a_message(
    root: Path, daemons: DaemonFactory
) -> None:
    doc = config(root)
    doc["risk_profiles"]["sup"]["approval_timeout_secs"] = 1
    daemon = daemons(doc, faults=False).start()
    child = spawn_chat(daemon, root)
    try:
        child.expect_exact(PROMPT)
        child.sendline("write notes.txt: hi")
        child.expect_exact("approve: write notes.txt? [y/N] (denied in 1s)")
        child.expect_exact("no answer in time: denied")
        child.expect_exact("[file_write: approval_denied]")
        child.expect_exact(PROMPT)
        child.sendline("y")  # too late: an ordinary message now, not a yes
        child.expect_exact("alpha (offline) heard: y")
        child.expect_exact(PROMPT)
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert not (root / "state" / "agents" / "alpha" / "workspace" / "notes.txt").exists()
