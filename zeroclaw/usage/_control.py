"""`zeroclaw usage` on the control socket: the ledger's rows, read by the operator."""

from __future__ import annotations

import re

from ..control import Exchange, Reply, UsageQuery, UsageReply, error_reply
from ._ledger import LedgerError
from ._service import UsageService

DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class UsageQueryCommand:
    def __init__(self, usage: UsageService) -> None:
        self._usage = usage

    async def __call__(self, request: UsageQuery, exchange: Exchange) -> Reply[UsageReply]:
        if not DAY.match(request.since):
            return error_reply("bad_request", f"since {request.since[:40]!r} is not YYYY-MM-DD")
        try:
            reply = await self._usage.query(request.since, request.agent)
        except LedgerError as exc:
            return error_reply("internal", str(exc))
        return Reply(ok=True, data=reply)
