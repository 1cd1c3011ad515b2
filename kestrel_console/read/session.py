"""The read side's connection: one per ``Reader``, read-only, with a bounded wait per query,
reopened when the server dropped it. ``_rows`` runs one statement, ``_snapshot`` several in one
snapshot and one round trip; the job modules (overview, workers, executions, timeline, blockers)
hold their SQL and the methods that run it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Self, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from kestrel_core import KestrelError
from kestrel_core.db import (
    check_current,
    check_schema_name,
    close_quietly,
    connect,
    render,
    statements_beside,
    unavailable,
)

SQL = statements_beside(__file__)
# Exported: the console benchmarks set what a reader's session sets.
SET_SESSION = SQL.set_session

T = TypeVar("T")

APPLICATION_NAME = "kestrel-console"
# A worker is alive while it has not stopped and beat within this many seconds.
DEFAULT_DEAD_AFTER_S = 30.0

# One query of a snapshot: (key in the result, statement, parameters).
Part = tuple[str, str, "dict[str, Any] | None"]


class ReadTimeout(KestrelError):
    """A console query ran longer than the Reader's statement_timeout (it was cancelled)."""


# psycopg prepares a statement only when asked (``prepare=True``): the Reader's statements are
# planned with their values (see _open), but the dashboard's, which run every refresh with the
# same constants, are bound once and prepared (``_snapshot(prepared=True)``). None would turn
# preparing off altogether, even when asked.
ONLY_WHEN_ASKED = 1 << 31


class ReaderSession:
    """The connection half of ``Reader`` (see ``read.reader``): opens on first use, serialises
    calls with a lock, turns a cancelled query into ReadTimeout and a lost server into
    DatabaseUnavailable."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "kestrel",
        statement_timeout_ms: int = 2000,
        dead_after_s: float = DEFAULT_DEAD_AFTER_S,
        connect_timeout: int = 5,
    ) -> None:
        self.dsn = dsn
        self.schema = check_schema_name(schema)
        self.statement_timeout_ms = int(statement_timeout_ms)
        self.dead_after_s = float(dead_after_s)
        self.connect_timeout = connect_timeout
        self._conn: psycopg.Connection | None = None
        self._bound_cache: dict[tuple[Any, ...], sql.SQL] = {}
        self._lock = threading.RLock()

    # -- connection ------------------------------------------------------------------------

    def _open(self) -> psycopg.Connection:
        # Prepared only when asked (the dashboard's, see ONLY_WHEN_ASKED): every other statement
        # is planned with its values, so NULL filters fold away and a status literal meets its
        # partial index.
        conn = connect(self.dsn, application_name=APPLICATION_NAME, connect_timeout=self.connect_timeout, prepare=False)
        conn.prepare_threshold = ONLY_WHEN_ASKED
        try:
            conn.execute(SET_SESSION, {"timeout": f"{self.statement_timeout_ms}ms"})
            check_current(conn, self.schema)
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
        except psycopg.OperationalError as exc:  # the server went away right after accepting us
            conn.close()
            raise unavailable(self.dsn, exc) from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        close_quietly(conn)

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        with self._lock:
            self._drop()

    def cancel(self) -> None:
        """Ask the server to cancel the query running now, if any (safe from another thread:
        the TUI calls it when the view that asked is closed). The call raises ReadTimeout."""
        conn = self._conn
        if conn is not None and not conn.closed:
            try:
                conn.cancel_safe(timeout=2.0)
            except psycopg.Error:
                pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, what: str, fn: Callable[[psycopg.Connection], T]) -> T:
        """Run ``fn`` on the connection, reconnecting once if the server dropped it."""
        with self._lock:
            for retry in (True, False):
                fresh = self._conn is None or self._conn.closed
                if fresh:
                    self._drop()
                    self._conn = self._open()
                conn = self._conn
                assert conn is not None  # opened just above when there was none
                try:
                    return fn(conn)
                except psycopg.errors.QueryCanceled as exc:
                    if "statement timeout" not in (exc.diag.message_primary or ""):
                        raise ReadTimeout(f"the console query {what!r} was cancelled") from None
                    raise ReadTimeout(
                        f"the console query {what!r} took longer than "
                        f"{self.statement_timeout_ms} ms and was cancelled: the database is "
                        "slow or a lock blocks it"
                    ) from None
                except psycopg.errors.UndefinedTable:
                    check_current(conn, self.schema)  # raises SchemaOutdated if that is why
                    raise
                except psycopg.OperationalError as exc:
                    broken = conn.broken or conn.closed
                    self._drop()
                    if broken and retry and not fresh:
                        continue  # the server restarted since the last call: one new connection
                    raise unavailable(self.dsn, exc) from None
            raise AssertionError("unreachable")

    def _rows(self, what: str, statement: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        query = render(statement, self.schema)

        def run(conn: psycopg.Connection) -> list[dict[str, Any]]:
            with conn.cursor(row_factory=dict_row) as cur:
                cur.execute(query, params)
                return cur.fetchall()

        return self._call(what, run)

    def now(self) -> datetime:
        """The database's clock (ages and bars are measured against it, not the local one)."""
        return self._rows("now", SQL.now)[0]["now"]

    def _snapshot(self, what: str, parts: list[Part], *, prepared: bool = False) -> dict[str, Any]:
        """Run several queries pipelined in one REPEATABLE READ READ ONLY transaction: one
        snapshot (the parts agree with each other), one round trip for the statements.

        ``prepared``: each statement is bound to its values on the client (literals) and
        prepared on the server, once per connection; later calls with the same values skip
        parsing and planning (a good part of a refresh's server time: bench/README.md, "Console").
        With no parameter left, the server keeps one plan, made knowing the values. Only for
        parameters that are our own constants (numbers), never for what a user typed.
        """
        queries = [(key, render(statement, self.schema), params) for key, statement, params in parts]

        def run(conn: psycopg.Connection) -> dict[str, Any]:
            started = time.perf_counter()
            cursors = []
            bound = (
                [(key, self._bound(conn, query, params), None) for key, query, params in queries]
                if prepared
                else queries
            )
            with conn.pipeline(), conn.transaction():
                for key, query, params in bound:
                    cur = conn.cursor(row_factory=dict_row)
                    cur.execute(query, params, prepare=prepared or None)
                    cursors.append((key, cur))
            out: dict[str, Any] = {key: cur.fetchall() for key, cur in cursors}
            out["elapsed_ms"] = (time.perf_counter() - started) * 1000.0
            return out

        return self._call(what, run)

    def _bound(self, conn: psycopg.Connection, query: sql.SQL, params: dict[str, Any] | None) -> sql.SQL:
        """``query`` with ``params`` written in as literals (cached: the same text each refresh)."""
        key = (query.as_string(None), tuple(sorted((params or {}).items())))
        text = self._bound_cache.get(key)
        if text is None:
            if len(self._bound_cache) > 64:
                self._bound_cache.clear()
            text = self._bound_cache[key] = sql.SQL(psycopg.ClientCursor(conn).mogrify(query, params))
        return text
