"""What the console runs with, one object for the CLI and the TUI: database, schema, operator,
report folders, where reads go (a streaming replica, ``--read-dsn``), and (for the TUI)
read-only, the refresh interval and the replica lag past which it shows a banner.

``build_settings`` turns the CLI's global options (and their environment variables) into one;
``console_settings`` gives the TUI its own copy, from those settings, a DSN, or keywords.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from kestrel_core import Kestrel, default_operator
from kestrel_core.db import check_schema_name, resolve_dsn

# The TUI's refresh interval in seconds until `+`/`-` change it.
DEFAULT_REFRESH = 2.0
# Ad-hoc SQL and reports: a result is cut once its values hold this many bytes (as text).
# Kept here, not in adhoc/, so that the CLI's options do not import the SQL guard (pglast).
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
# The TUI shows a banner while the read replica is more than this many seconds behind.
DEFAULT_MAX_LAG = 10.0


@dataclass
class Settings:
    dsn: str = ""
    schema: str = "kestrel"
    operator: str = field(default_factory=default_operator)
    queries: list[Path] = field(default_factory=list)
    dsn_given: bool = False  # --dsn or $KESTREL_DSN was set (the demo starts its own server if not)
    schema_given: bool = False  # --schema was given (it then wins over a worker app's own schema)
    read_only: bool = False  # TUI: hide and refuse every action
    refresh: float = DEFAULT_REFRESH  # TUI: seconds between refreshes
    # Ad-hoc SQL and reports: their own read-only login (--reader-dsn / $KESTREL_READER_DSN),
    # and the marked opt-in to run them on a superuser login (--allow-privileged-sql).
    reader_dsn: str | None = None
    allow_privileged_sql: bool = False
    # Where the console reads (--read-dsn / $KESTREL_READ_DSN), e.g. a streaming replica:
    # dashboards, lists, show, status, metrics, and ad-hoc SQL and reports unless --reader-dsn
    # names their login. Every action still goes to ``dsn`` (the primary).
    read_dsn: str | None = None
    max_lag: float = DEFAULT_MAX_LAG  # TUI: banner past this replica lag (seconds)

    @property
    def reads_dsn(self) -> str:
        """Where the canned reads run: the read DSN (a replica) when given, else the console's."""
        return self.read_dsn or self.dsn

    @property
    def adhoc_dsn(self) -> str:
        """Where ad-hoc SQL and reports run: the reader login when given, else the read DSN
        (a replica) when given, else the console's."""
        return self.reader_dsn or self.read_dsn or self.dsn

    def kestrel(self) -> Kestrel:
        """A Kestrel app for this DSN and schema (the caller closes it)."""
        return Kestrel(self.dsn, schema=self.schema, application_name="kestrel-console")


def default_acting_operator() -> str:
    """Who acts when no ``--operator`` is given: ``$KESTREL_OPERATOR``, else ``$USER``."""
    return os.environ.get("KESTREL_OPERATOR") or default_operator()


def build_settings(
    dsn: str | None,
    schema: str | None,
    operator: str | None,
    queries: list[Path] | None,
    reader_dsn: str | None = None,
    allow_privileged_sql: bool = False,
    read_dsn: str | None = None,
    max_lag: float = DEFAULT_MAX_LAG,
) -> Settings:
    """The settings of the CLI's global options: ``$KESTREL_DSN``, ``$KESTREL_OPERATOR``,
    ``$KESTREL_QUERIES`` (the folders add to the ``--queries`` ones), ``$KESTREL_READER_DSN``
    and ``$KESTREL_READ_DSN`` fill in."""
    dirs = list(queries or [])
    env_dirs = os.environ.get("KESTREL_QUERIES")
    if env_dirs:
        dirs.extend(Path(p) for p in env_dirs.split(os.pathsep) if p)
    return Settings(
        dsn=resolve_dsn(dsn),
        schema=schema or "kestrel",
        schema_given=schema is not None,
        operator=operator or default_acting_operator(),
        queries=dirs,
        dsn_given=dsn is not None or "KESTREL_DSN" in os.environ,
        reader_dsn=reader_dsn or os.environ.get("KESTREL_READER_DSN") or None,
        allow_privileged_sql=allow_privileged_sql,
        read_dsn=read_dsn or os.environ.get("KESTREL_READ_DSN") or None,
        max_lag=float(max_lag),
    )


class ConsoleOptions(TypedDict, total=False):
    """The keyword arguments of ``console_settings`` (and of the TUI, which passes them on):
    each optional, defaulted there."""

    dsn: str | None
    schema: str | None
    operator: str | None
    queries: list[Path] | None
    read_only: bool
    refresh: float
    reader_dsn: str | None
    allow_privileged_sql: bool | None
    read_dsn: str | None
    max_lag: float | None


def console_settings(
    settings: Settings | str | None = None,
    *,
    dsn: str | None = None,
    schema: str | None = None,
    operator: str | None = None,
    queries: list[Path] | None = None,
    read_only: bool = False,
    refresh: float = DEFAULT_REFRESH,
    reader_dsn: str | None = None,
    allow_privileged_sql: bool | None = None,
    read_dsn: str | None = None,
    max_lag: float | None = None,
) -> Settings:
    """The TUI's own settings, from the CLI's ``Settings`` (anything with .dsn/.schema/
    .operator/.queries), a DSN string, or keywords; keywords win over the settings object.
    The schema name is checked (ValueError)."""
    if isinstance(settings, str):
        dsn, settings = dsn or settings, None
    base: Any = settings
    return Settings(
        dsn=resolve_dsn(dsn or getattr(base, "dsn", None)),
        schema=check_schema_name(schema or getattr(base, "schema", None) or "kestrel"),
        operator=operator or getattr(base, "operator", None) or default_operator(),
        queries=[Path(p) for p in (queries if queries is not None else getattr(base, "queries", None) or [])],
        dsn_given=bool(getattr(base, "dsn_given", dsn is not None)),
        schema_given=schema is not None or bool(getattr(base, "schema_given", False)),
        read_only=read_only,
        refresh=float(refresh),
        reader_dsn=reader_dsn or getattr(base, "reader_dsn", None),
        allow_privileged_sql=bool(
            allow_privileged_sql if allow_privileged_sql is not None else getattr(base, "allow_privileged_sql", False)
        ),
        read_dsn=read_dsn or getattr(base, "read_dsn", None),
        max_lag=float(max_lag if max_lag is not None else getattr(base, "max_lag", DEFAULT_MAX_LAG)),
    )
