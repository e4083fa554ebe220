"""The Hello carries the agent's own sandbox report; an older agent's Hello still decodes."""

from __future__ import annotations

import msgspec

from zeroclaw.bus import PROTOCOL_VERSION, Hello, decode_from_agent, encode


def test_a_hello_carries_the_sandbox_report() -> None:
    hello = Hello(pid=3, sandbox="landlock ABI 7, 12 rules", sandbox_in_force=True)
    assert decode_from_agent(encode(hello)) == hello


def test_a_hello_without_the_report_is_valid_and_not_in_force() -> None:
    old = msgspec.msgpack.encode({"t": "hello", "v": PROTOCOL_VERSION, "pid": 3})
    assert decode_from_agent(old) == Hello(pid=3, sandbox="", sandbox_in_force=False)
