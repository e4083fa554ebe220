"""`zeroclaw memory ...` through the daemon: the control command for MemoryCommand."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ..control import Exchange, MemoryCommand, Reply, control_code, error_reply
from ._errors import MemoryServiceError
from ._service import MemoryService, operator_request


class MemoryControlCommand:
    """An operator's memory operation on one agent's namespace. `known_agents` is asked at
    each request: a reload changes which agents there are."""

    def __init__(self, memory: MemoryService, known_agents: Callable[[], frozenset[str]]) -> None:
        self._memory = memory
        self._known_agents = known_agents

    async def __call__(
        self, request: MemoryCommand, exchange: Exchange
    ) -> Reply[dict[str, object]]:
        try:
            answer = await operator_request(
                self._memory, self._known_agents(), request.op, request.agent, request.args
            )
        except MemoryServiceError as exc:
            return error_reply(control_code(exc.code), exc.detail)
        # The struct's fields; the client converts them to MEMORY_REPLY_TYPES[op].
        data: dict[str, object] = msgspec.to_builtins(answer)
        return Reply(ok=True, data=data)
