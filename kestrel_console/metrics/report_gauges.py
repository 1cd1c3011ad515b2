"""Saved reports as gauges: a report whose header has a ``-- metric:`` line runs at each scrape
(read-only, through the same guard as ``kestrel-console report``, with its parameters'
defaults, on the reader login when one is given) and each row of its result is one sample.

A report that fails (a timeout, a column it does not have, text where a number goes, two rows
with the same labels, more rows than ``MAX_SERIES``) exports none of its gauges for that scrape
and ``kestrel_reports_up{report="NAME"} 0``; the endpoint's log says why, once per change.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
from prometheus_client.core import GaugeMetricFamily, Metric

from kestrel_core.db import close_quietly, connect

from ..read import APPLICATION_NAME
from ..reports import Report, ReportError, ReportMetric, bind_params, discover, run_report
from ..safe_text import visible
from ..settings import Settings

# Rows one report may return: each is a series of Prometheus; more is a report meant for people.
MAX_SERIES = 1000


class ReportGauges:
    """The gauges of the reports that declare one; called once per scrape."""

    def __init__(self, settings: Settings, *, timeout_ms: int) -> None:
        self.settings = settings
        self.timeout_ms = timeout_ms
        self._conn: psycopg.Connection | None = None
        self._said: dict[str, str | None] = {}

    def close(self) -> None:
        conn, self._conn = self._conn, None
        close_quietly(conn)

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self.close()
            self._conn = connect(self.settings.adhoc_dsn, application_name=APPLICATION_NAME, connect_timeout=5)
        return self._conn

    def _say(self, name: str, problem: str | None) -> None:
        """Log a report's problem when it changes (not at every scrape)."""
        before = self._said.get(name)
        if before == problem:
            return
        self._said[name] = problem
        if problem is not None:
            print(f"metrics: report {name!r}: {problem}", file=sys.stderr, flush=True)
        elif before is not None:
            print(f"metrics: report {name!r} works again", file=sys.stderr, flush=True)

    def __call__(self) -> Iterator[Metric]:
        broken: list[ReportError] = []
        try:
            reports = [r for r in discover(self.settings.queries, broken=broken).values() if r.metrics]
        except ReportError as exc:  # a folder that went away
            self._say("(folders)", str(exc))
            reports = []
        for problem in broken:
            self._say(str(problem).split(",")[0], str(problem))
        up = GaugeMetricFamily(
            "kestrel_reports_up", "1 if the saved report's gauges were read this scrape", labels=["report"]
        )
        taken: dict[str, str] = {}
        for report in reports:
            try:
                families = self._run(report, taken)
            except Exception as exc:  # any failure of one report leaves the others
                self._say(report.name, visible(str(exc).strip()))
                up.add_metric([report.name], 0)
                continue
            self._say(report.name, None)
            up.add_metric([report.name], 1)
            yield from families
        yield up

    def _run(self, report: Report, taken: dict[str, str]) -> list[Metric]:
        for metric in report.metrics:
            if taken.get(metric.name, report.name) != report.name:
                raise ReportError(f"metric {metric.name} is declared by report {taken[metric.name]!r} too")
        for metric in report.metrics:
            taken[metric.name] = report.name
        try:
            result = run_report(
                self._connection(),
                report,
                bind_params(report, {}),
                schema=self.settings.schema,
                timeout_ms=self.timeout_ms,
                max_rows=MAX_SERIES,
                allow_privileged=self.settings.allow_privileged_sql,
            )
        except psycopg.Error:
            self.close()
            raise
        if result.truncated:
            raise ReportError(f"it returned more than {MAX_SERIES} rows: a gauge is a few series")
        return [_family(report, metric, result.columns, result.rows) for metric in report.metrics]


def _family(report: Report, metric: ReportMetric, columns: list[str], rows: list[tuple[Any, ...]]) -> Metric:
    if not columns:
        raise ReportError("it returned no column")
    value_column = metric.value or columns[-1]
    missing = [c for c in (value_column, *metric.labels) if c not in columns]
    if missing:
        raise ReportError(f"metric {metric.name}: the result has no column {', '.join(missing)}")
    at = columns.index(value_column)
    label_at = [columns.index(c) for c in metric.labels]
    family = GaugeMetricFamily(
        metric.name, f"Saved report {report.name}: {report.description}", labels=list(metric.labels)
    )
    seen: set[tuple[str, ...]] = set()
    for row in rows:
        value = row[at]
        if value is None:
            continue
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int | float | Decimal):
            raise ReportError(f"metric {metric.name}: column {value_column} holds {type(value).__name__}, not a number")
        labels = tuple("" if row[i] is None else visible(str(row[i])) for i in label_at)
        if labels in seen:
            raise ReportError(f"metric {metric.name}: two rows have the same labels {dict(zip(metric.labels, labels))}")
        seen.add(labels)
        family.add_metric(list(labels), float(value))
    return family
