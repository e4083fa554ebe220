"""trio imported without the `ldconfig -p` it runs on import (ADR 0067): where the C
library is glibc, the daemon and the zygote start no subprocess for it, and trio still
names its worker threads; both import trio only through `import_trio`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from zeroclaw._trio_import import glibc_pthread

# Imports trio (as given), records every subprocess started meanwhile, then runs a worker
# thread and reads the name the kernel shows for it.
PROBE = """
import json, sys, threading
started = []
sys.addaudithook(lambda e, a: started.append(a[0]) if e == "subprocess.Popen" else None)
{how}
import trio

def comm():
    with open(f"/proc/self/task/{{threading.get_native_id()}}/comm") as f:
        return f.read().strip()

print(json.dumps({{"started": started, "comm": trio.run(trio.to_thread.run_sync, comm)}}))
"""


def probe(how: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(how=how)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


@pytest.mark.skipif(glibc_pthread() is None, reason="not glibc: trio asks ldconfig as before")
def test_import_trio_starts_no_subprocess_and_trio_still_names_its_threads() -> None:
    plain = probe("")
    assert plain["started"] == ["/sbin/ldconfig"]  # what the probe sees without it
    quiet = probe("from zeroclaw._trio_import import import_trio; import_trio()")
    assert quiet["started"] == []
    # Named after its job, as without it (unnamed, it would show the interpreter's name).
    assert quiet["comm"] == plain["comm"] and str(quiet["comm"]).startswith("comm from trio")


def test_the_daemon_and_the_zygote_reach_trio_only_through_import_trio() -> None:
    """What runs before `import_trio` in each (the CLI's daemon command, the daemon's entry,
    the zygote's module) must not import trio itself, or the ldconfig run comes back."""
    code = (
        "import sys, zeroclaw.cli.daemon_cmd, zeroclaw.supervisor._daemon, "
        "zeroclaw.supervisor._zygote; print('trio' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False"
