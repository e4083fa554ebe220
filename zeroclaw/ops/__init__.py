"""Operating the daemon: its systemd unit, `doctor`, metrics and the event stream's readers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._metrics import Metrics, MetricsSources

# Loaded on first use: the CLI imports this package, and only the daemon needs the
# Prometheus client and the HTTP server behind the metrics.
_load = lazy_attributes(__name__, {"Metrics": "._metrics", "MetricsSources": "._metrics"})


def __getattr__(name: str) -> Any:
    return _load(name, globals())


__all__: list[str] = ["Metrics", "MetricsSources"]
