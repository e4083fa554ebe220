"""The daemon's descriptors (ADR 0045): its soft limit goes up to the hard one at start,
and a control peer check that runs out of descriptors says so, instead of blaming the
peer ("cannot verify which process"). Each in a child process with its own limits."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_daemon_raises_its_soft_descriptor_limit_to_the_hard_one() -> None:
    out = run(
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 512))\n"
        "from zeroclaw.supervisor._daemon import raise_descriptor_limit\n"
        "raise_descriptor_limit()\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE))\n"
    )
    assert out == "(512, 512)"


def test_reading_a_peers_ancestry_out_of_descriptors_raises_emfile_not_unverifiable() -> None:
    out = run(
        "import errno, os, resource\n"
        "from zeroclaw.supervisor._peer import read_stat\n"
        "assert read_stat(os.getpid()) is not None\n"
        "assert read_stat(2**22 + 1) is None  # no such process: that is None\n"
        "held = []\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
        "try:\n"
        "    while True: held.append(os.open('/dev/null', os.O_RDONLY))\n"
        "except OSError: pass\n"
        "try:\n"
        "    read_stat(os.getpid())\n"
        "except OSError as exc:\n"
        "    print(errno.errorcode[exc.errno])\n"
    )
    assert out == "EMFILE"
