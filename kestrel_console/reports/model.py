"""Saved SQL reports (the ``Report`` and its parameters): ``queries/NAME.sql`` files with a header of ``--`` comments.

A report file looks like::

    -- description: Every run that errored in the last month
    -- param: since interval = '1 month'
    SELECT ... WHERE finished_at > now() - %(since)s::interval

The header is the leading run of comment (and blank) lines. ``-- key: value`` lines in it must
use a known key: ``description`` (repeat it to continue a long one) or ``param``
(``NAME TYPE [= DEFAULT]``, the default written as an SQL literal: ``'1 month'``, ``60``,
``true``, ``null``), or ``metric`` (``gauge NAME [value=COLUMN] [labels=COLUMN,...]``: the
metrics endpoint exports the report as a gauge, see ``ReportMetric``). Other header comments
are free text. The body is one read-only statement
whose parameters are psycopg named placeholders ``%(name)s``, bound by the driver, never pasted
into the text (write a literal ``%`` as ``%%``). Cast each placeholder in the SQL
(``%(since)s::interval``) so Postgres knows its type.

Reports are found in the folder shipped with the package and in the user's folders
(``--queries``, ``$KESTREL_QUERIES``): the first user folder given wins over later ones, and
any user folder wins over the shipped one, so a user can override a shipped report by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kestrel_core import KestrelError, NotFound

SHIPPED_PACKAGE_DIR = "queries_shipped"  # where pyproject force-includes <repo>/queries in the wheel
REPORT_SUFFIX = ".sql"
# A value written as an SQL string literal, '...' with '' for a quote (in a header or a --param).
SQL_LITERAL = re.compile(r"^'((?:[^']|'')*)'$")


class ReportError(KestrelError):
    """A report file is malformed, or its parameters were given wrongly."""


class ReportNotFound(NotFound):
    """No report of that name in any folder searched."""


@dataclass(frozen=True)
class ReportParam:
    name: str
    type: (
        str  # canonical: text, integer, bigint, numeric, float, boolean, interval, timestamptz, timestamp, date, jsonb
    )
    default: str | None  # the SQL literal as written ('1 month', 60, null); None = required

    @property
    def required(self) -> bool:
        return self.default is None

    @property
    def default_text(self) -> str | None:
        """The default as a user would type it (``1 month``), None for no default or ``null``."""
        if self.default is None:
            return None
        return _parse_literal(self.default)


@dataclass(frozen=True)
class ReportMetric:
    """A ``-- metric:`` line: the report is also a Prometheus gauge. Each row of its result is
    one sample: ``value`` names the column holding the number (default: the last column), and
    ``labels`` the columns whose text labels the sample. The report runs with its parameters'
    defaults, at every scrape of ``kestrel-console metrics``."""

    kind: str  # "gauge" (a report's numbers go up and down; a counter would have to be monotonic)
    name: str  # kestrel_report_..., a Prometheus metric name
    value: str | None  # None: the result's last column
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    name: str
    description: str
    params: list[ReportParam]
    sql: str  # the body only: what is sent to Postgres
    path: Path
    shipped: bool
    overrides: tuple[Path, ...] = field(default=())  # same-named files this one hides
    metrics: tuple[ReportMetric, ...] = field(default=())  # its ``-- metric:`` lines

    def param(self, name: str) -> ReportParam | None:
        return next((p for p in self.params if p.name == name), None)


def _parse_literal(literal: str) -> str | None:
    """An SQL literal as text: ``'it''s'`` -> ``it's``, ``null`` -> None, ``60`` -> ``60``."""
    quoted = SQL_LITERAL.match(literal)
    if quoted:
        return quoted.group(1).replace("''", "'")
    if literal.lower() == "null":
        return None
    return literal
