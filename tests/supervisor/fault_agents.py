"""Agent entry points that misbehave on purpose, selected by alias prefix.

Loaded into the real zygote through ZEROCLAW_AGENT_ENTRYPOINT; every other alias runs the
real agent. They inject faults; they do not replace any zeroclaw component.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from zeroclaw.agent import AgentSpec, Ping, Pong, Ready, agent_main, decode_link, encode_link
from zeroclaw.control import FrameDecoder, encode_frame


def _serve_link_blocking(link_fd: int) -> int:
    sock = socket.socket(fileno=link_fd)
    sock.sendall(encode_frame(encode_link(Ready(os.getpid()))))
    decoder = FrameDecoder(1 << 20)
    while True:
        data = sock.recv(65536)
        if not data:
            return 0
        for frame in decoder.feed(data):
            message = decode_link(frame)
            if isinstance(message, Ping):
                sock.sendall(encode_frame(encode_link(Pong(message.seq))))


def main(spec: AgentSpec, link_fd: int) -> int:
    alias = spec.alias
    workspace = Path(spec.workspace)
    if alias.startswith("crash"):
        return 3
    if alias.startswith("stubborn"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["sleep", "1000"], start_new_session=False)
        (workspace / "grandchild.pid").write_text(str(child.pid))
        return _serve_link_blocking(link_fd)
    if alias.startswith("mute"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(3600)  # never says Ready
        return 0
    return agent_main(spec, link_fd)
