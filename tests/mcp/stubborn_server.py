"""An MCP stdio server that will not go quietly, raw JSON-RPC (no SDK), for the orphan tests.

    python stubborn_server.py

At its start it ignores SIGTERM, starts a child that leaves its session (setsid) and a
grandchild that leaves it too through a double fork (its parent exits at once, so it is
re-parented away from the server), both ignoring SIGTERM, keeping the server's stdout open
and sleeping until killed. It writes their pids, one a line, to `stubborn-<its pid>.pids`
in its working directory (where it may), then serves one tool, echo {text} (read-only).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time


def linger() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(3600)


def spawn() -> list[int]:
    child = os.fork()
    if child == 0:
        os.setsid()
        linger()
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            linger()
        os.write(write, f"{grandchild}\n".encode())
        os._exit(0)
    os.waitpid(middle, 0)
    os.close(write)
    grandchild = int(os.read(read, 64))
    os.close(read)
    return [child, grandchild]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


ECHO = {
    "name": "echo",
    "description": "Echo the text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    "annotations": {"readOnlyHint": True},
}


def main() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pids = spawn()
    name = f"stubborn-{os.getpid()}.pids"
    try:
        with open(name + ".tmp", "w") as fh:
            fh.write("".join(f"{pid}\n" for pid in pids))
        os.rename(name + ".tmp", name)
    except OSError:  # a discovery probe may write nothing: it serves all the same
        pass
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stubborn", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [ECHO]}
        elif method == "tools/call":
            text = str((message["params"].get("arguments") or {}).get("text", ""))
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        else:
            result = {}
        send({"jsonrpc": "2.0", "id": ident, "result": result})
    # stdin closed: it still will not go (SIGTERM is ignored); only SIGKILL ends it
    linger()


if __name__ == "__main__":
    main()
