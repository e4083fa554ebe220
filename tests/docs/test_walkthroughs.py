"""Every walkthrough in README.md and docs/guide/*.md runs as written (issue 25).

The convention (docs/guide/development.md): a fenced ```sh block is a walkthrough. Its
commands run in order, one shell per document (variables and background jobs carry over
from block to block, as in the reader's terminal), in a temporary copy of the checkout's
demo (`etc/`, and `.venv` linked), against a daemon started by the Makefile's own `make run`
recipe, as the reader's first terminal does. Each command must exit 0, or the code its
trailing comment names as `(exit N)`. A block that cannot run here (it blocks, needs root,
systemd or hardware) is preceded by `<!-- not run: reason -->`; synopses with placeholders
are ```text blocks. The guide's pages start from the tour's first block (PATH and
ZEROCLAW_CONFIG), as the guide says.

Only the listeners' ports differ from what is written: each document's daemon listens on
free loopback ports instead of 8787 (the webhook) and 8788 (the gateway), so documents and
other tests can run side by side.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.supervisor import harness

REPO = Path(__file__).resolve().parent.parent.parent
README = REPO / "README.md"
GUIDE = REPO / "docs" / "guide"
DOCUMENTS = [README, *sorted(GUIDE.glob("*.md"))]
DEMO_PORT = "127.0.0.1:8787"
DEMO_GATEWAY = "127.0.0.1:8788"
NOT_RUN = re.compile(r"^<!-- not run: (.+\S) -->$")
EXPECTED_EXIT = re.compile(r"#.*\(exit (\d+)\)\s*$")
FENCE = re.compile(r"^\s*```(\S*)\s*$")  # indented too (inside a list item)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    not_run: str | None  # the reason, when the block is marked so

    @property
    def runs(self) -> bool:
        return self.language == "sh" and self.not_run is None


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        i += 1
        previous = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marked = NOT_RUN.match(previous.strip())
        found.append(
            Block(path, start + 1, opening.group(1), "\n".join(body), marked and marked.group(1))
        )
    return found


def commands(block: Block) -> Iterator[tuple[int, str]]:
    """(line, command) for each logical line: backslash continuations joined."""
    pending: list[str] = []
    first = 0
    for offset, raw in enumerate(block.text.splitlines(), start=block.line + 1):
        if not pending:
            first = offset
        if raw.rstrip().endswith("\\"):
            pending.append(raw.rstrip()[:-1])
            continue
        pending.append(raw)
        command = " ".join(part.strip() for part in pending).strip()
        pending = []
        if command and not command.startswith("#"):
            yield first, command


def script(document: Path, setup: list[Block]) -> tuple[str, int]:
    """The shell script of a document's walkthroughs, and how many blocks it runs."""
    out = ["set -u"]
    ran = 0
    for block in [*setup, *(b for b in blocks(document) if b.runs)]:
        ran += block.path == document
        for line, command in commands(block):
            expected = EXPECTED_EXIT.search(command)
            want = int(expected.group(1)) if expected else 0
            where = f"{block.path.relative_to(REPO)}:{line}"
            out.append(f"printf '%s\\n' {shlex.quote('+ ' + command)} >&2")
            out.append(command)
            out.append(
                f"__rc=$?; if [ $__rc -ne {want} ]; then printf '%s\\n' "
                f"{shlex.quote(f'walkthrough: {where}: expected exit {want}, got ')}$__rc >&2; "
                "exit 97; fi"
            )
    return "\n".join(out) + "\n", ran


def tour_setup() -> list[Block]:
    """The README tour's first walkthrough (PATH and ZEROCLAW_CONFIG), which the guide's
    pages assume."""
    first = next(b for b in blocks(README) if b.runs)
    assert "ZEROCLAW_CONFIG" in first.text and "PATH" in first.text, first
    return [first]


def free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


class DemoDaemon:
    """`make run` in a copy of the demo: the Makefile's recipe (env file, then the daemon),
    with `install` taken as done (this venv is the one the test runs in)."""

    def __init__(self, root: Path, ports: dict[str, str]) -> None:
        self.root = root
        shutil.copytree(
            REPO / "etc", root / "etc", ignore=shutil.ignore_patterns(".zeroclaw", "env")
        )
        config = root / "etc" / "zeroclaw.toml"
        config.write_text(moved(config.read_text(), ports))
        (root / ".venv").symlink_to(Path(sys.prefix))
        self.notify_path = root / "notify.sock"
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        self.log_path = root / "daemon.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZEROCLAW_")}
        env["NOTIFY_SOCKET"] = str(self.notify_path)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                ["make", "-s", "-f", str(REPO / "Makefile"), "-o", "install", "run"],
                cwd=self.root,
                env=env,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            self.notify.settimeout(1.0)
            try:
                message = self.notify.recv(4096).decode()
            except TimeoutError:
                if self.proc.poll() is not None:
                    break
                continue
            if "READY=1" in message:
                return
        raise AssertionError(f"the demo daemon never became ready:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-6000:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.notify.close()


def moved(text: str, ports: dict[str, str]) -> str:
    """`text` with each demo listener's address replaced by this run's."""
    for demo, port in ports.items():
        text = text.replace(demo, port)
    return text


def run_walkthroughs(document: Path, setup: list[Block]) -> None:
    text, ran = script(document, setup)
    if not ran:
        pytest.skip(f"{document.name} has no walkthrough that runs")
    root = Path(tempfile.mkdtemp(prefix="zc-doc-", dir="/tmp"))  # short: socket paths
    ports = {DEMO_PORT: free_port(), DEMO_GATEWAY: free_port()}
    daemon = DemoDaemon(root, ports)
    try:
        daemon.start()
        (root / "walkthrough.sh").write_text(moved(text, ports))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZEROCLAW_")}
        result = subprocess.run(
            ["bash", "-c", "exec 2>&1; . ./walkthrough.sh"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        print(result.stderr[-20000:])  # shown with -s: what each command printed, in order
        print(result.stdout[-20000:])
        assert result.returncode == 0, (
            f"{document.relative_to(REPO)}: a walkthrough failed\n--- stderr\n"
            f"{result.stderr[-6000:]}\n--- stdout\n{result.stdout[-3000:]}\n"
            f"--- daemon log\n{daemon.log()}"
        )
    finally:
        daemon.stop()
        harness.remove_root(root)


def test_the_readme_tour_runs_as_written() -> None:
    run_walkthroughs(README, [])


@pytest.mark.parametrize("page", sorted(p.name for p in GUIDE.glob("*.md")))
def test_each_guide_page_runs_as_written(page: str) -> None:
    run_walkthroughs(GUIDE / page, tour_setup())


def test_the_tour_is_walked_not_skipped() -> None:
    """At least the tour runs: status, chat, routing, the webhook, the approval, sessions."""
    tour = [b for b in blocks(README) if b.runs]
    text = "\n".join(b.text for b in tour)
    assert len(tour) >= 8
    for needle in ("zeroclaw status", "chat -m", "route probe", "curl", "approvals approve",
                   "sessions list", "zeroclaw stop"):  # fmt: skip
        assert needle in text, needle
    skipped = [b for b in blocks(README) if b.language == "sh" and not b.runs]
    assert all(b.not_run for b in skipped)
    assert "make run" in skipped[0].text and "make test" in skipped[0].text


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_shell_block_is_a_walkthrough_or_says_why_not(document: Path) -> None:
    """No shell in another fence escapes the test: bash/console/shell blocks are refused,
    and a marker must sit on a sh block."""
    for block in blocks(document):
        assert block.language not in ("bash", "shell", "console", "zsh", ""), (
            f"{document.name}:{block.line}: use ```sh (run) or ```text (a synopsis)"
        )
        if block.not_run is not None:
            assert block.language == "sh", f"{document.name}:{block.line}: marker on a non-sh block"


def test_the_setup_blocks_come_first() -> None:
    """`make run` and `make test` stay the README's first instructions."""
    first = next(b for b in blocks(README) if b.language == "sh")
    assert first.text.splitlines()[0].startswith("make run")
    assert first.text.splitlines()[1].startswith("make test")


def test_the_readme_is_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def test_no_document_points_at_a_file_the_repository_does_not_have() -> None:
    """Relative links resolve, and no SPEC.md is promised that is not here."""
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for target in link.findall(text):
            if "://" in target:
                continue
            assert (document.parent / target).exists(), f"{document.name}: {target}"
        assert "SPEC.md" not in text or (REPO / "SPEC.md").exists(), document.name
