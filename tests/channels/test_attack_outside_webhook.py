"""The attack pass on the webhook listener's shared state (issue 24, Deliver 10): requests
that are refused anyway (over their sender's rate, to an approval that is not pending) must
not take what every channel and sender of the listener shares, the replay window's nonces."""

from __future__ import annotations

import secrets
from pathlib import Path

import msgspec

from tests.channels.test_webhook import served, signed


async def test_refused_requests_do_not_fill_the_listeners_nonce_cache(tmp_path: Path) -> None:
    # The hole: the signature was recorded before the rate and the approval lookup, so one
    # secret holder's flood of 429s (on a 2-a-minute channel) and of answers to made-up
    # approvals filled the cache (100 000 in production) and every other channel of the
    # listener answered 503 busy for the replay window.
    async with served(tmp_path) as s:
        assert s.adapter._gate is not None
        s.adapter._gate.nonces.capacity = 4
        statuses = [
            (
                await s.post("slow", {"sender": "eve", "text": f"m{n}"}, secret="another-secret")
            ).status_code
            for n in range(6)
        ]
        assert statuses == [200, 200, 429, 429, 429, 429]
        for _ in range(4):
            body = msgspec.json.encode({"approved": True})
            made_up = f"/v1/channels/ops/approvals/{secrets.token_urlsafe(18)}"
            answer = await s.http.post(made_up, content=body, headers=signed(body))
            assert answer.status_code == 404
        ok = await s.post("ops", {"sender": "bob", "text": "still served"})
        assert ok.status_code == 200, ok.text
        # and a replay is still refused, within the rate or not
        again = msgspec.json.encode({"sender": "bob", "text": "once"})
        headers = signed(again)
        first = await s.http.post("/v1/channels/ops/messages", content=again, headers=headers)
        replay = await s.http.post("/v1/channels/ops/messages", content=again, headers=headers)
        assert (first.status_code, replay.status_code) == (200, 409)
