"""Running a user's read query safely: the one place the console executes ad-hoc SQL and
saved reports.

Layer 1 is ``guard.check_read_only``. Layer 2 is here: the query runs alone (the extended
protocol refuses a second statement) inside ``BEGIN READ ONLY`` with a statement timeout, and
is always rolled back, so even a query the guard let through by mistake cannot write a row.
Its search path is ``pg_catalog``, the Kestrel schema, ``pg_temp`` and nothing else, so no
name it leaves unqualified (a function by attribute notation, an operator, a type) resolves to
another schema's code. Its result is cut at ``max_rows`` rows and ``max_bytes`` bytes.
Layer 3 (``reader``) runs it as the read-only role and releases what it leaves in the session.

A login no role switch can contain (superuser, BYPASSRLS, CREATEROLE, REPLICATION, a member of
a predefined role with server powers, or one that may become such a role: ``reader.privilege``)
is refused before the query runs, unless the caller passes ``allow_privileged`` (the
console's ``--allow-privileged-sql``, which it marks): the console should be given a read-only
login for ad-hoc SQL instead (``--reader-dsn``). A login that cannot assume the reader role is
refused: ad-hoc SQL runs only as it.

Before the query, the session's lexing settings are pinned for the transaction (client
encoding UTF8: ``pin_lexing``) and the server's own bytes of the text compared with what the
guard parsed; its names are resolved against the live catalog (``resolve``).

Bounds on the server: ``statement_timeout`` (at most ``MAX_TIMEOUT_MS``, ten minutes: a console
query, not a batch job), ``work_mem`` for each sort or hash, and ``temp_file_limit`` for the
temporary files a query writes (``migrate`` as a superuser grants the reader role the right to
set it, a PGC_SUSET setting; without it, and with the server's own limit higher, refused). On
the client: the console's own clock (``hard_limit``), and each row measured on the server and
sent as NULLs when larger than what is left of ``max_bytes`` (``SIZED``).
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pglast
import psycopg
from psycopg import sql
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.rows import tuple_row

from kestrel_core import DatabaseUnavailable, KestrelError
from kestrel_core.db import statements_beside

from ..settings import DEFAULT_MAX_BYTES
from .guard import QueryRefused, as_sent, check_read_only
from .hard_limit import HardLimit, QueryTimeout
from .reader_role import DEFAULT_READER_ROLE, ReaderStatus, assume_reader, privilege, release_session_state
from .resolve import check_names, names_of

SQL = statements_beside(__file__)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "QueryFailed",
    "QueryResult",
    "QueryTimeout",
    "ReaderStatus",
    "run_read_only",
    "timeout_ms",
]

# Ten minutes: an ad-hoc query or a report is for a console; longer work belongs elsewhere.
MAX_TIMEOUT_MS = 10 * 60 * 1000
# Per sort or hash node (a query may have several) and for every temporary file of the query.
READER_WORK_MEM = "16MB"
READER_TEMP_FILE_LIMIT = "256MB"
_TEMP_FILE_LIMIT_KB = 256 * 1024
_NON_ASCII_RUN = re.compile(rb"[\x80-\xff]+")


class QueryFailed(KestrelError):
    """Postgres refused or failed the query (syntax, unknown column, permission, read-only)."""

    def __init__(self, message: str, *, sqlstate: str | None = None, position: int | None = None):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.position = position  # 1-based character offset in the query, when Postgres gave one


@dataclass
class QueryResult:
    """What a read query returned, cut at ``max_rows`` rows or ``max_bytes`` bytes
    (``truncated``; ``cut_at_bytes`` when the bytes did it)."""

    columns: list[str]
    rows: list[tuple]
    truncated: bool
    elapsed_ms: float
    cut_at_bytes: int | None = None  # the byte limit that cut the result, else None
    reader: ReaderStatus | None = field(default=None, compare=False)

    @property
    def notice(self) -> str | None:
        """The reader role's note, when layer 3 is weaker than promised."""
        return self.reader.notice if self.reader is not None else None

    @property
    def row_count(self) -> int:
        return len(self.rows)


LEXING_SETTINGS = {"client_encoding": "UTF8", "standard_conforming_strings": "on"}


def run_read_only(
    conn: psycopg.Connection,
    query: str,
    params: Mapping[str, Any] | None = None,
    *,
    schema: str = "kestrel",
    timeout_ms: float = 10_000,
    max_rows: int = 1000,
    max_bytes: int = DEFAULT_MAX_BYTES,
    check: bool = True,
    placeholders: bool = False,
    reader_role: str | None = DEFAULT_READER_ROLE,
    allow_privileged: bool = False,
) -> QueryResult:
    """Run one read query in a read-only transaction that is always rolled back.

    Checks it with ``check_read_only`` first (unless ``check=False``). ``params`` are bound by
    psycopg; when None the text is sent as is, so ``LIKE '%x'`` needs no escaping.
    ``placeholders=True`` is for saved reports: the text uses ``%(name)s`` (and ``%%``) even
    when no parameter is given. ``conn`` may be autocommit or not, but must not be inside a
    transaction. ``reader_role`` (None: skip layer 3) is assumed when the login may; the
    result's ``reader`` says how it went. Session advisory locks and prepared statements are
    released afterwards. A superuser (BYPASSRLS, CREATEROLE) login is refused with
    QueryRefused unless ``allow_privileged``. Raises QueryRefused, QueryTimeout, QueryFailed or
    DatabaseUnavailable; ValueError for a timeout below 1 ms (0 would mean no timeout) or above
    ten minutes, or a negative limit.
    """
    timeout = _checked_timeout(timeout_ms)
    if max_rows < 0:
        raise ValueError("max_rows must be >= 0")
    if max_bytes < 1:
        raise ValueError("max_bytes must be at least 1")
    names, sized, explain = None, False, False
    if check:
        statement = check_read_only(query, placeholders=placeholders)
        names, sized = names_of(statement), isinstance(statement, pglast.ast.SelectStmt)
        explain = isinstance(statement, pglast.ast.ExplainStmt)
        if explain and params:
            raise QueryRefused("EXPLAIN with query parameters: explain the query with its values written in")
    if placeholders and params is None:
        params = {}  # psycopg then turns %% into %, as the guard assumed
    _require_idle(conn)
    reader = None
    try:
        with HardLimit(conn, timeout) as limit:
            try:
                reader = _begin(conn, schema, timeout, reader_role, allow_privileged)
                if names is not None:
                    _check_server_text(conn, query)
                    check_names(conn, names, schema)
                started = time.perf_counter()
                if explain:
                    columns, rows, cut = _fetch_explain(conn, query, schema, max_rows + 1, max_bytes, placeholders)
                else:
                    columns, rows, cut = _fetch(conn, query, params, max_rows + 1, max_bytes, sized)
                elapsed_ms = (time.perf_counter() - started) * 1000
            except psycopg.errors.QueryCanceled as exc:
                raise limit.stopped() or _cancelled(exc, timeout) from exc
            except psycopg.Error as exc:
                raise limit.stopped() or _failed(conn, exc) from exc
            except _Shifted as shifted:
                raise limit.stopped() or _failed(conn, shifted.error, shifted.shift) from shifted.error
            finally:
                _rollback(conn)
    finally:
        _release(conn)
    return QueryResult(
        columns, rows[:max_rows], cut or len(rows) > max_rows, elapsed_ms, max_bytes if cut else None, reader
    )


def timeout_ms(seconds: float) -> int:
    """``seconds`` as whole milliseconds for statement_timeout; ValueError below 1 ms, when not
    finite, or beyond ten minutes (``MAX_TIMEOUT_MS``)."""
    return _checked_timeout(seconds * 1000)


def _checked_timeout(ms: float) -> int:
    if not math.isfinite(ms):
        raise ValueError(f"timeout of {ms:g} ms: it must be a finite number")
    if ms < 1:
        raise ValueError(f"timeout of {ms:g} ms: it must be at least 1 ms (0 would mean no timeout)")
    if ms > MAX_TIMEOUT_MS:
        raise ValueError(
            f"timeout of {ms:g} ms: it must be at most {MAX_TIMEOUT_MS} ms (10 minutes: "
            "ad-hoc SQL and reports are for a console)"
        )
    return math.ceil(ms)


def _release(conn: psycopg.Connection) -> None:
    if conn.closed or conn.broken:
        return
    try:
        release_session_state(conn)
    except psycopg.OperationalError:
        if not conn.closed:
            raise


def _require_idle(conn: psycopg.Connection) -> None:
    status = conn.info.transaction_status
    if not conn.closed and status != TransactionStatus.IDLE:
        raise psycopg.ProgrammingError(
            f"run_read_only() needs a connection outside any transaction (it is {status.name}): "
            "it opens its own read-only transaction"
        )


def _begin(
    conn: psycopg.Connection,
    schema: str,
    timeout_ms: int,
    reader_role: str | None,
    allow_privileged: bool,
) -> ReaderStatus | None:
    conn.execute(SQL.begin_read_only if conn.autocommit else SQL.set_transaction_read_only)
    _pin_lexing(conn)
    privileged = privilege(conn, schema)
    if privileged and not allow_privileged:
        raise QueryRefused(
            f"{privileged}: ad-hoc SQL does not run on such a login (its session can undo the "
            "read-only role); give the console a read-only login with --reader-dsn (or "
            "$KESTREL_READER_DSN), or pass --allow-privileged-sql"
        )
    conn.execute(
        SQL.set_limits,
        {"statement_timeout": str(timeout_ms), "idle_timeout": str(max(timeout_ms, 1000)), "schema": schema},
    )
    reader = assume_reader(conn, reader_role, schema) if reader_role else None
    if reader is not None and not reader.assumed:
        raise QueryRefused(f"{reader.problem}: ad-hoc SQL runs only as the read-only role {reader.role}")
    limits = conn.execute(
        SQL.set_memory_limits, {"work_mem": READER_WORK_MEM, "temp_file_limit": READER_TEMP_FILE_LIMIT}
    ).fetchone()
    if reader is not None and limits is not None and limits[2] is None:
        _require_temp_file_limit(conn, reader.role)
    if reader is not None and privileged:
        reader = dataclasses.replace(reader, privileged=privileged)
    return reader


def _pin_lexing(conn: psycopg.Connection) -> None:
    """Pin the settings the server's lexer depends on (``pin_lexing``) and check they hold,
    as the server reports them to libpq, before the query is encoded and sent."""
    try:
        with conn.transaction():  # a savepoint: a refused conversion leaves the transaction usable
            row = conn.execute(SQL.pin_lexing).fetchone()
    except psycopg.Error as exc:
        database = conn.info.parameter_status("server_encoding") or "?"
        raise QueryRefused(
            f"the database's encoding {database} cannot be read as UTF8 "
            f"({(exc.diag.message_primary or str(exc)).strip()}): ad-hoc SQL needs a database "
            "whose encoding converts to and from UTF8"
        ) from None
    assert row is not None
    reported = {name: conn.info.parameter_status(name) for name in LEXING_SETTINGS}
    if reported != LEXING_SETTINGS or conn.info.encoding != "utf-8" or row[2] != "safe_encoding":
        raise QueryRefused(
            f"the session's lexing settings could not be pinned ({reported}, backslash_quote {row[2]}): "
            "the guard cannot know what the server would read"
        )


def _check_server_text(conn: psycopg.Connection, query: str) -> None:
    """Refuse the query unless the server's copy of it, in the database's encoding, has the
    same ASCII characters in the same places as the text the guard parsed: only those
    (quotes, backslashes, dollars, dashes...) steer a lexer; every other character is a run of
    bytes >= 0x80 on both sides (every server encoding is ASCII-safe)."""
    row = conn.execute(SQL.server_bytes, {"text": query}).fetchone()
    assert row is not None
    if _ascii_shape(bytes(row[0])) != _ascii_shape(query.encode("utf-8")):
        raise QueryRefused(
            "the database's encoding turns a character of the query into a different ASCII character: "
            "write it without that character"
        )


def _ascii_shape(data: bytes) -> bytes:
    return _NON_ASCII_RUN.sub(b"\x80", data)


def _require_temp_file_limit(conn: psycopg.Connection, role: str) -> None:
    """Without the right to set temp_file_limit the query would run with the server's (no
    limit by default): refuse unless that is already within ``READER_TEMP_FILE_LIMIT``."""
    row = conn.execute(SQL.temp_file_limit_kb).fetchone()
    if row is not None and 0 <= int(row[0]) <= _TEMP_FILE_LIMIT_KB:
        return
    raise QueryRefused(
        f"role {role} may not set temp_file_limit, which is unlimited here: a superuser must run "
        f"`kestrel-console migrate` (or GRANT SET ON PARAMETER temp_file_limit TO {role})"
    )


def _fetch(
    conn: psycopg.Connection,
    query: str,
    params: Mapping[str, Any] | None,
    limit: int,
    max_bytes: int,
    sized: bool = False,
    names: list[str] | None = None,
) -> tuple[list[str], list[tuple], bool]:
    """At most ``limit`` rows and ``max_bytes`` bytes (as text), streamed: the server stops
    once we have enough. True when the bytes cut it.

    ``sized`` (a SELECT the guard accepted): the server measures each row first
    (``_sized_query``) and sends a row too big for what is left of ``max_bytes`` as NULLs,
    so no value larger than the limit ever reaches the client.
    ``names`` given: ``query`` already returns each row's size as its last column.
    ``stream()`` uses the extended protocol, which refuses a second statement.
    """
    if sized and names is None:
        names = _column_names(conn, query, params)
        if names:
            query = _sized_query(query, len(names), max_bytes)
    rows: list[tuple] = []
    size, cut = 0, False
    with conn.cursor(row_factory=tuple_row) as cur:
        stream = cur.stream(sql.SQL(query), params)  # the operator's own query, passed by the guard
        try:
            for row in stream if limit > 0 else ():
                if names:
                    row, row_size = row[:-1], row[-1] or 0
                else:
                    row_size = sum(_size(value) for value in row)
                size += row_size
                if size > max_bytes:
                    cut = True
                    break
                rows.append(row)
                if len(rows) >= limit:
                    break
        finally:
            # Cancels the rest of a truncated result: stream() is a generator, typed as an Iterator.
            stream.close()  # type: ignore[attr-defined]
        if names:
            return names, rows, cut
        if cur.description is not None:
            return [column.name for column in cur.description], rows, cut
        return _describe_columns(conn, cur), rows, cut


def _fetch_explain(
    conn: psycopg.Connection, query: str, schema: str, limit: int, max_bytes: int, placeholders: bool
) -> tuple[list[str], list[tuple], bool]:
    """An EXPLAIN's lines, each sized on the server: the planner prints its folded constants,
    so one line can be any size (a 32 MB one reached the client before, review r44b)."""
    text = as_sent(query) if placeholders else query
    tokens = [t for t in pglast.parser.scan(text) if t.name not in ("SQL_COMMENT", "C_COMMENT")]
    body = _statement_body(text[tokens[0].start :]) if tokens else text
    wrapped = sql.SQL(SQL.explain_lines).format(schema=sql.Identifier(schema)).as_string(conn)
    limit_bytes = min(int(max_bytes), 2**31 - 1)
    params = {"statement": body, "max_bytes": limit_bytes}
    return _fetch(conn, wrapped, params, limit, max_bytes, names=["QUERY PLAN"])


def _statement_body(query: str) -> str:
    """``query`` without what follows its last token: semicolons, comments (the guard made
    sure it is one statement)."""
    end = 0
    for token in pglast.parser.scan(query):
        if token.name not in ("ASCII_59", "SQL_COMMENT", "C_COMMENT"):
            end = token.end + 1
    return query[:end]


class _Shifted(Exception):
    """A server error on the wrapped text: ``shift`` characters precede the user's query."""

    def __init__(self, error: psycopg.Error, shift: int) -> None:
        super().__init__(str(error))
        self.error, self.shift = error, shift


def _column_names(conn: psycopg.Connection, query: str, params: Mapping[str, Any] | None) -> list[str]:
    wrapped = SQL.columns_of.format(body=_statement_body(query))
    with conn.cursor() as cur:
        try:
            cur.execute(sql.SQL(wrapped), params)
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.errors.QueryCanceled):
                raise
            raise _Shifted(exc, wrapped.index("(\n") + 2) from exc
        return [column.name for column in cur.description or ()]


def _sized_query(query: str, count: int, max_bytes: int) -> str:
    cases = ", ".join(SQL.sized_case.format(limit=int(max_bytes), i=i) for i in range(count))
    columns = ", ".join(f"c{i}" for i in range(count))
    sizes = " + ".join(SQL.sized_column.format(i=i) for i in range(count))
    return SQL.sized.format(cases=cases, sizes=sizes, columns=columns, body=_statement_body(query))


def _size(value: Any) -> int:
    """About how many bytes ``value`` takes as text (what the screen and the file will hold)."""
    if value is None:
        return 0
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    return len(value if isinstance(value, str) else str(value))


def _describe_columns(conn: psycopg.Connection, cur: psycopg.Cursor[Any]) -> list[str]:
    """Column names of a statement that returned no rows (streaming drops the description).

    Asks the server to describe the statement again without running it.
    """
    sent = cur._query  # psycopg exposes the converted query ($n placeholders) for this
    if sent is None:
        return []
    pgconn = conn.pgconn
    prepared = pgconn.prepare(b"", sent.query, sent.types or None)
    if prepared.status != ExecStatus.COMMAND_OK:
        return []
    described = pgconn.describe_prepared(b"")
    if described.status != ExecStatus.COMMAND_OK:
        return []
    encoding = conn.info.encoding
    return [(described.fname(i) or b"").decode(encoding) for i in range(described.nfields)]


def _cancelled(exc: psycopg.errors.QueryCanceled, timeout_ms: float) -> KestrelError:
    primary = exc.diag.message_primary or str(exc)
    if "statement timeout" in primary:
        return QueryTimeout(
            f"query cancelled after {timeout_ms / 1000:.1f} s (statement_timeout); narrow it or add a LIMIT"
        )
    return QueryFailed(primary, sqlstate=exc.sqlstate)


def _failed(conn: psycopg.Connection, exc: psycopg.Error, shift: int = 0) -> KestrelError:
    if conn.closed:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return DatabaseUnavailable(f"lost the connection to PostgreSQL: {reason}")
    diag = exc.diag
    if exc.sqlstate is None:  # raised by psycopg itself, not by the server
        message = str(exc)
        if "didn't produce a result" in message:
            message = "the statement returned no rows: run a query (SELECT, WITH, VALUES, EXPLAIN, SHOW)"
        elif "COPY" in message:
            message = "COPY is not supported here: run a query (SELECT, WITH, VALUES, EXPLAIN, SHOW)"
        return QueryFailed(message)
    message = diag.message_primary or str(exc)
    if diag.message_hint:
        message = f"{message}\n{diag.message_hint}"
    position = int(diag.statement_position) - shift if diag.statement_position else None
    if position is not None and position < 1:
        position = None
    return QueryFailed(message, sqlstate=exc.sqlstate, position=position)


def _rollback(conn: psycopg.Connection) -> None:
    """End the transaction whatever happened; a dead connection has nothing to roll back."""
    if conn.closed or conn.broken:
        return
    try:
        if conn.info.transaction_status == TransactionStatus.ACTIVE:
            _leave_copy_mode(conn)
        conn.rollback()
    except psycopg.OperationalError:
        if not conn.closed:
            raise


def _leave_copy_mode(conn: psycopg.Connection) -> None:
    """A COPY sent with check=False leaves libpq in COPY mode: abort or drain it.

    By then psycopg has cancelled the statement, so the server ends the COPY soon.
    """
    pgconn = conn.pgconn
    while (result := pgconn.get_result()) is not None:
        if result.status == ExecStatus.COPY_OUT:
            while pgconn.get_copy_data(0)[0] >= 0:
                pass
        elif result.status == ExecStatus.COPY_IN:
            pgconn.put_copy_end(b"COPY is not allowed here")
