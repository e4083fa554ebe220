"""A loopback HTTP receiver for scheduled runs' webhook deliveries, run as its own process
(`python -m tests.schedules.receiver FILE`): it prints its port, then appends every POST it
gets to FILE as one JSON line ({"headers": {...}, "body": "..."}) and answers 200. Its own
process, so that a test can SIGKILL the daemon around it and read what arrived."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        size = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(size)
        record = {"headers": {k.lower(): v for k, v in self.headers.items()}, "body": body.decode()}
        with open(sys.argv[1], "a") as out:
            out.write(json.dumps(record) + "\n")
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    server = HTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
