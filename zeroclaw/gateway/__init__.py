"""The HTTP gateway (issue 29): an OpenAI-compatible API for the agents its tokens reach,
and the operator's dashboard in the browser, on one listener (hypercorn's trio worker,
within the bounds of ADR 0045).

The daemon imports this package only when `[gateway]` is configured, and the listener
(hypercorn, the pages) only when it starts one: the pure parts load without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._api import GatewayErrorCode

if TYPE_CHECKING:
    from ._server import Gateway, Operator, table_operator

_lazily = lazy_attributes(
    __name__,
    {"Gateway": "._server", "Operator": "._server", "table_operator": "._server"},
)


def __getattr__(name: str) -> object:
    return _lazily(name, globals())


__all__ = ["Gateway", "GatewayErrorCode", "Operator", "table_operator"]
