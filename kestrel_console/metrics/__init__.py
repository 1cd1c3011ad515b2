"""``kestrel-console metrics``: a Prometheus/OpenMetrics endpoint (issue 47). ``collector``
turns the on-call snapshot (``read.operations``, which ``status --format json --all`` prints
too) into metric families at each scrape; ``report_gauges`` adds the saved reports that declare
a ``-- metric:`` line; ``server`` parses HOST:PORT and serves them."""

from __future__ import annotations

from .collector import DURATION_BUCKETS, SETTLE_S, KestrelCollector
from .report_gauges import MAX_SERIES, ReportGauges
from .server import DEFAULT_LISTEN, DEFAULT_TIMEOUT_S, BadListen, Endpoint, build_collector, parse_listen, serve

__all__ = [
    "DEFAULT_LISTEN",
    "DEFAULT_TIMEOUT_S",
    "DURATION_BUCKETS",
    "MAX_SERIES",
    "SETTLE_S",
    "BadListen",
    "Endpoint",
    "KestrelCollector",
    "ReportGauges",
    "build_collector",
    "parse_listen",
    "serve",
]
