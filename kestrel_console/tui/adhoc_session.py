"""The connection the SQL and Reports screens run their queries on (the reader login when the
console has one): opened on first use in a worker thread, dropped when it breaks, and
cancellable from the UI thread without blocking it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from kestrel_core.db import close_quietly, connect, unavailable

from ..settings import Settings
from .config import ADHOC_MAX_ROWS, ADHOC_TIMEOUT_MS

T = TypeVar("T")


class AdhocSession:
    def __init__(self, config: Settings, application_name: str = "kestrel-console sql") -> None:
        self.config = config
        self.application_name = application_name
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self.running = False  # from ``reserve`` (the key) to the end of ``run``

    def reserve(self) -> bool:
        """On the UI thread, before starting the worker that will ``run``: False if a query is
        still on its way. Without it, a second key pressed before the first worker held the
        connection started a second run."""
        if self.running:
            return False
        self.running = True
        return True

    def limits(self) -> dict[str, Any]:
        """The bounds every query of the SQL and Reports screens runs under, as the keyword
        arguments of ``run_read_only`` and ``run_report``."""
        return {
            "schema": self.config.schema,
            "timeout_ms": ADHOC_TIMEOUT_MS,
            "max_rows": ADHOC_MAX_ROWS,
            "allow_privileged": self.config.allow_privileged_sql,
        }

    def run(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """Run ``fn(conn)`` in this (worker) thread; one query at a time."""
        with self._lock:
            self.running = True
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = connect(
                        self.config.adhoc_dsn, application_name=self.application_name, connect_timeout=5
                    )
                conn = self._conn
                try:
                    return fn(conn)
                except psycopg.OperationalError as exc:
                    self._drop()
                    raise unavailable(self.config.adhoc_dsn, exc) from None
                finally:
                    if self._conn is not None and (self._conn.closed or self._conn.broken):
                        self._drop()
            finally:
                self.running = False

    def cancel(self) -> bool:
        """Ask the server to cancel the running query (from any thread, without waiting)."""
        conn = self._conn
        if conn is None or not self.running:
            return False
        threading.Thread(target=_cancel, args=(conn,), daemon=True, name="kestrel-cancel").start()
        return True

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        close_quietly(conn)

    def close(self) -> None:
        self._drop()


def _cancel(conn: psycopg.Connection) -> None:
    try:
        conn.cancel_safe(timeout=5.0)
    except Exception:
        pass
