"""What every reading command shares: the Reader or connection it reads through (a note on
stderr when that is a replica), the ``--format`` and ``--max-rows`` options, and notes on
stderr (so that ``json`` and ``csv`` on stdout stay clean)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import typer

from kestrel_core.db import connect, describe_target

from .. import render
from ..read import APPLICATION_NAME, Reader
from ..read.replica import describe_reads, replica_state_on
from ..settings import Settings
from .errors import fail, handles_errors

# A command run by hand may wait longer than a TUI refresh, but never hangs.
CLI_TIMEOUT_MS = 10_000
DEFAULT_MAX_ROWS = 1000
MAX_ROWS_LIMIT = 1_000_000  # --max-rows past this is a typo, and no terminal wants it


def check_max_rows(value: int) -> int:
    """``--max-rows``'s callback: a number of rows from 1 to MAX_ROWS_LIMIT."""
    if not 1 <= value <= MAX_ROWS_LIMIT:
        fail(f"--max-rows {value}: give a number of rows from 1 to {MAX_ROWS_LIMIT:,}", code=2)
    return value


def one_of(allowed: tuple[str, ...], option: str) -> Callable[[str | None], str | None]:
    """An option callback that refuses a value outside ``allowed`` (None passes: not given)."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in allowed:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(allowed)}", param_hint=option)
        return value

    return check


def format_option() -> Any:
    return typer.Option(
        "table",
        "--format",
        "-f",
        callback=one_of(render.FORMATS, "--format"),
        help="Output: table (for people), json (array of objects), csv (with a header row).",
    )


@contextmanager
def open_reader(s: Settings) -> Iterator[Reader]:
    """The canned reads' Reader, on the read DSN (a replica) when given; then a note on stderr
    says how far behind it is."""
    reader = Reader(s.reads_dsn, schema=s.schema, statement_timeout_ms=CLI_TIMEOUT_MS)
    try:
        if s.read_dsn:
            note(describe_reads(describe_target(s.read_dsn), handles_errors(reader.replica_state)()))
        yield reader
    finally:
        reader.close()


@contextmanager
def open_connection(s: Settings) -> Iterator[psycopg.Connection]:
    """The connection ad-hoc SQL and reports run on: the reader login when given, else the
    read DSN (a replica) when given; with a read DSN, a note on stderr says how far behind."""
    conn = handles_errors(connect)(s.adhoc_dsn, application_name=APPLICATION_NAME, connect_timeout=5)
    try:
        if s.read_dsn:
            note(describe_reads(describe_target(s.adhoc_dsn), handles_errors(replica_state_on)(conn)))
        yield conn
    finally:
        conn.close()


def note(message: str) -> None:
    """A note for the person at the terminal: stderr, never mixed into the output."""
    typer.echo(message, err=True)
