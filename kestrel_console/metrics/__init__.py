"""``kestrel-console metrics``: a Prometheus/OpenMetrics endpoint. ``collector``
turns the on-call snapshot (``read.operations``, which ``status --format json --all`` prints
too) into metric families at each scrape; ``report_gauges`` adds the saved reports that declare
a ``-- metric:`` line; ``server`` parses HOST:PORT and serves them.

The names below are imported when first used (PEP 562): every ``kestrel-console`` command
imports this package for its options' defaults, and only ``metrics`` needs prometheus_client.
"""

from __future__ import annotations

import importlib
from typing import Any

from .defaults import DEFAULT_LISTEN, DEFAULT_TIMEOUT_S, SETTLE_S

_LAZY = {
    "DURATION_BUCKETS": "collector",
    "KestrelCollector": "collector",
    "MAX_SERIES": "report_gauges",
    "ReportGauges": "report_gauges",
    "BadListen": "server",
    "Endpoint": "server",
    "build_collector": "server",
    "parse_listen": "server",
    "serve": "server",
}

__all__ = ["DEFAULT_LISTEN", "DEFAULT_TIMEOUT_S", "SETTLE_S", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
