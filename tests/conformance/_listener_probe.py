"""An agent entry point (ZEROCLAW_AGENT_ENTRYPOINT) for the HTTP listener cells: the agent
`prober`, a real agent process in the environment the zygote gives it, asks the metrics
listener for the metrics, the webhook listener and the gateway for a turn, with what it
has (no credential), and writes what it got and its whole environment, as one JSON line, to the
FIFO named in its workspace's `listeners.json`. Then it serves as any agent."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from zeroclaw.agent import AgentSpec, agent_main

CONNECT_TRIES = 200  # the webhook listener starts after the agents: bounded retries


def main(spec: AgentSpec, link_fd: int) -> int:
    if spec.alias == "prober":
        plan = json.loads((Path(spec.workspace) / "listeners.json").read_text())
        metrics = ask(plan["metrics_port"], b"GET /metrics HTTP/1.1\r\nhost: x\r\n")
        body = b'{"sender": "prober", "text": "hi"}'
        webhook = ask(
            plan["webhook_port"],
            b"POST /v1/channels/hook/messages HTTP/1.1\r\nhost: x\r\n"
            b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body),
            body,
        )
        chat = b'{"model": "alpha", "messages": [{"role": "user", "content": "hi"}]}'
        gateway = ask(
            plan["gateway_port"],
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
            b"content-type: application/json\r\ncontent-length: %d\r\n" % len(chat),
            chat,
        )
        line = {
            "metrics": metrics,
            "webhook": webhook,
            "gateway": gateway,
            "env": dict(os.environ),
        }
        fd = os.open(plan["fifo"], os.O_RDWR | os.O_CLOEXEC)
        os.write(fd, json.dumps(line).encode() + b"\n")
        os.close(fd)
    return agent_main(spec, link_fd)


def ask(port: int, head: bytes, body: bytes = b"") -> str:
    """The whole answer (connection: close), or the error."""
    for _ in range(CONNECT_TRIES):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(head + b"connection: close\r\n\r\n" + body)
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
                return data.decode("latin-1")
        except ConnectionRefusedError:
            time.sleep(0.05)  # not up yet: this probe runs as its agent starts
        except OSError as exc:
            return f"error: {exc}"
    return "error: never listened"
