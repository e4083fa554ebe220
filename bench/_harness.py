"""Shared benchmark plumbing: timing with medians, the result shape, the table."""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Result:
    """One figure beside its baseline, measured in the same run.

    `ratio` is value / baseline_value, so whether lower or higher is better depends on the
    unit (seconds: lower is better; per second: higher is better). `target` says which.
    """

    name: str
    value: float
    unit: str
    baseline: str
    baseline_value: float
    ratio: float
    target: str = ""

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def result(
    name: str, value: float, unit: str, baseline: str, baseline_value: float, target: str = ""
) -> Result:
    ratio = value / baseline_value if baseline_value else float("inf")
    return Result(name, value, unit, baseline, baseline_value, round(ratio, 3), target)


def p50_p99(samples: list[float]) -> dict[str, float]:
    """The median and the 99th percentile (nearest rank) of some latencies."""
    ordered = sorted(samples)
    return {"p50": statistics.median(ordered), "p99": ordered[int(len(ordered) * 0.99) - 1]}


def free_port() -> int:
    """A loopback TCP port free right now (for a server the benchmark starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def keepalive_socket(port: int) -> socket.socket:
    """A loopback TCP connection for a minimal HTTP/1.1 client (no Nagle delay)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_some(sock: socket.socket) -> bytes:
    """What the server sent next; ConnectionError when it closed the connection."""
    data = sock.recv(65536)
    if not data:
        raise ConnectionError("closed")
    return data


def read_response(sock: socket.socket) -> int:
    """One whole HTTP/1.1 response with a content-length, read off `sock`: its status."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += recv_some(sock)
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in lines if line.lower().startswith(b"content-length:")
    )
    while len(rest) < length:
        rest += recv_some(sock)
    return int(lines[0].split()[1])


def wait_http(url: str, deadline_secs: float = 60) -> None:
    """Until `url` answers 200 (a listener starts in its own time; nothing signals it)."""
    import httpx  # only the benchmarks that start an HTTP server need it

    deadline = time.monotonic() + deadline_secs
    while True:
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not come up")
        time.sleep(0.05)


def median_seconds(fn: Callable[[], object], repeat: int = 7, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def table(results: list[Result]) -> str:
    header = f"{'benchmark':<44} {'value':>12} {'unit':<10} {'baseline':>12} {'ratio':>8}  target"
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(
            f"{r.name:<44} {r.value:>12.4g} {r.unit:<10} {r.baseline_value:>12.4g} "
            f"{r.ratio:>8.3f}  {r.target}"
        )
        lines.append(f"{'':<44} {'baseline: ' + r.baseline}")
    return "\n".join(lines)


def concurrent_rate(clients: list[Callable[[], object]], per_client: int) -> float:
    """Requests/s of `clients` running at once, each calling its function `per_client`
    times one after another; all start together, timed from their start to the last end.
    A failure in any client is raised here."""
    start = threading.Barrier(len(clients) + 1)
    failures: list[BaseException] = []

    def run(fn: Callable[[], object]) -> None:
        try:
            start.wait()
            for _ in range(per_client):
                fn()
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in clients]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if failures:
        raise failures[0]
    return len(clients) * per_client / elapsed
