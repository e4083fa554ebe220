"""A client that keeps `COUNT` hostile dispatches in flight until the daemon goes away:
`python -m tests.subagents.hostile_dispatcher RUNTIME_DIR AGENT_ID COUNT ITEMS`.

Each dispatch's input is an array of ITEMS distinct objects, for an input schema with
`uniqueItems` (quadratic in jsonschema). Prints `sent` once every connection has sent its
first request. A test tool, not a product part: plain threads are fine here.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from zeroclaw.control import ControlClient, Dispatch


def hammer(client: ControlClient, agent_id: str, items: int, sent: threading.Barrier) -> None:
    payload = {"items": [{"k": i} for i in range(items)]}
    first = True
    while True:
        try:
            with client.session(timeout=None) as session:
                session.send(Dispatch(agent_id=agent_id, task="t", input=payload))
                if first:
                    first = False
                    sent.wait()
                session.next_reply()
        except Exception:  # the daemon went away (or refused the connection): done
            if first:
                sent.abort()
            return


def main(argv: list[str]) -> int:
    runtime_dir, agent_id, count, items = Path(argv[1]), argv[2], int(argv[3]), int(argv[4])
    client = ControlClient(runtime_dir)
    sent = threading.Barrier(count + 1)
    threads = [
        threading.Thread(target=hammer, args=(client, agent_id, items, sent), daemon=True)
        for _ in range(count)
    ]
    for thread in threads:
        thread.start()
    sent.wait()
    print("sent", flush=True)
    for thread in threads:
        thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
