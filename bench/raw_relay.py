"""The baseline: a plain pyzmq ROUTER relay with no policy, no auth, no acks, no trio.

With $ZC_RAW_CURVE set (four z85 keys joined by ",": server public, server secret, client
public, client secret), every socket speaks CURVE like the bus (no ZAP handler: the keys are
checked at the handshake only, as the router's ZAP does; nothing per message).

python -m bench.raw_relay relay ENDPOINT
python -m bench.raw_relay sink ENDPOINT COUNT        # prints seconds from first to last
python -m bench.raw_relay blast ENDPOINT COUNT SIZE
python -m bench.raw_relay echo ENDPOINT              # answers every message
python -m bench.raw_relay ping ENDPOINT COUNT SIZE   # prints p50 p99 in ms
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

import zmq

from bench._harness import p50_p99

CURVE_ENV = "ZC_RAW_CURVE"


def _curve_keys() -> list[bytes] | None:
    raw = os.environ.get(CURVE_ENV)
    return [key.encode() for key in raw.split(",")] if raw else None


def curve_env() -> dict[str, str]:
    """The environment that makes every role of this relay speak CURVE (fresh keys)."""
    server_public, server_secret = zmq.curve_keypair()
    client_public, client_secret = zmq.curve_keypair()
    keys = (server_public, server_secret, client_public, client_secret)
    return {CURVE_ENV: ",".join(key.decode() for key in keys)}


def relay(endpoint: str) -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
    sock.sndhwm = sock.rcvhwm = 10_000
    keys = _curve_keys()
    if keys:
        sock.curve_server = True
        sock.curve_secretkey = keys[1]
    sock.bind(endpoint)
    while True:
        sender, dest, payload = sock.recv_multipart()
        with contextlib.suppress(zmq.ZMQError):  # destination not connected yet
            sock.send_multipart([dest, sender, payload])


def _client(endpoint: str, name: bytes) -> zmq.Socket[bytes]:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.routing_id = name
    sock.sndhwm = sock.rcvhwm = 10_000
    keys = _curve_keys()
    if keys:
        sock.curve_serverkey = keys[0]
        sock.curve_publickey = keys[2]
        sock.curve_secretkey = keys[3]
    sock.connect(endpoint)
    return sock


def _join(sock: zmq.Socket[bytes], peer: bytes) -> None:
    """Send hellos until the peer answers, so no message is lost to 'not connected yet'."""
    while True:
        sock.send_multipart([peer, b"hello"])
        if sock.poll(50):
            sock.recv_multipart()
            return


def sink(endpoint: str, count: int) -> None:
    sock = _client(endpoint, b"sink")
    first = last = 0.0
    got = 0
    while got < count:
        sender, payload = sock.recv_multipart()
        if payload == b"hello":
            sock.send_multipart([sender, b"hello"])
            continue
        got += 1
        last = time.perf_counter()
        if got == 1:
            first = last
    print(json.dumps({"seconds": last - first, "count": count}), flush=True)


def blast(endpoint: str, count: int, size: int) -> None:
    sock = _client(endpoint, b"blaster")
    _join(sock, b"sink")
    payload = b"x" * size
    for _ in range(count):
        sock.send_multipart([b"sink", payload])
    time.sleep(1)


def echo(endpoint: str) -> None:
    sock = _client(endpoint, b"echo")
    while True:
        sender, payload = sock.recv_multipart()
        sock.send_multipart([sender, payload])


def ping(endpoint: str, count: int, size: int) -> None:
    sock = _client(endpoint, b"pinger")
    _join(sock, b"echo")
    payload = b"x" * size
    rtts = []
    for _ in range(count):
        started = time.perf_counter()
        sock.send_multipart([b"echo", payload])
        sock.recv_multipart()
        rtts.append((time.perf_counter() - started) * 1000)
    print(json.dumps(p50_p99(rtts)))


if __name__ == "__main__":
    command, endpoint, *rest = sys.argv[1:]
    args = [int(a) for a in rest]
    {"relay": relay, "sink": sink, "blast": blast, "echo": echo, "ping": ping}[command](
        endpoint, *args
    )
