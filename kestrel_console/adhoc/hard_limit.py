"""The console's own wall clock over one ad-hoc query: the server's statement_timeout is a
request, not a bound.

Postgres acts on a cancel or a termination only where the running code checks for interrupts:
a function over one huge value (``md5`` of a 1 GB text) does not, and a query under a 5 s
statement_timeout ran 767 s; ``pg_terminate_backend`` took 34 s to end it. A network that stops
answering is the same to the console. So a watchdog thread, once the statement timeout has
passed by ``CANCEL_AFTER_S``, asks the server to cancel the query; ``TERMINATE_AFTER_S`` later
it terminates the query's session from a connection of its own (a login may end its own
sessions); ``ABANDON_AFTER_S`` later it shuts the connection's socket down, which wakes the
waiting thread with a lost connection whatever the server does. The query then fails with
one line saying which of these it took (``QueryTimeout``), at most ``timeout + HARD_GRACE_S``
seconds after it started, and the connection is closed (the next query opens another).

Where the server runs on the console's host (``backend_memory``), the watchdog also samples the
backend's private memory every ``SAMPLE_S`` and, past ``MEMORY_LIMIT_MB``, terminates it at
once (then shuts the socket as above): ``QueryTimeout`` says how much it used.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType

import psycopg
from psycopg.conninfo import make_conninfo

from kestrel_core import KestrelError
from kestrel_core.db import statements_beside

from .backend_memory import MEMORY_LIMIT_MB, BackendMemory, probe

SQL = statements_beside(__file__)

__all__ = ["ABANDON_AFTER_S", "CANCEL_AFTER_S", "HARD_GRACE_S", "TERMINATE_AFTER_S", "HardLimit", "QueryTimeout"]

CANCEL_AFTER_S = 1.0
TERMINATE_AFTER_S = 2.0
ABANDON_AFTER_S = 2.0
HARD_GRACE_S = CANCEL_AFTER_S + TERMINATE_AFTER_S + ABANDON_AFTER_S
SAMPLE_S = 0.05


class QueryTimeout(KestrelError):
    """The query ran past its statement timeout and was cancelled (by Postgres, or by the
    console's own clock: ``HardLimit``)."""


class HardLimit:
    """``with HardLimit(conn, timeout_ms) as limit:`` around one query on ``conn``."""

    def __init__(self, conn: psycopg.Connection, timeout_ms: float, memory_limit_mb: int = MEMORY_LIMIT_MB) -> None:
        self.conn = conn
        self.timeout_s = timeout_ms / 1000
        self.memory_limit_kb = memory_limit_mb * 1024
        self.memory: BackendMemory | None = probe(conn) if not conn.closed else None
        self.used_kb: int | None = None  # what the backend held when the watchdog stopped it for memory
        self.steps: list[str] = []  # what the watchdog did, in order
        self._done = threading.Event()
        self._started = time.monotonic()
        self._pid = conn.info.backend_pid if not conn.closed else 0
        self._thread = threading.Thread(target=self._watch, name="kestrel-sql-hard-limit", daemon=True)

    def __enter__(self) -> HardLimit:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._done.set()
        self._thread.join()
        if self.steps and not self.conn.closed:
            self.conn.close()  # terminated or shut down: nothing more will come on it

    def stopped(self) -> QueryTimeout | None:
        """The error to report when the watchdog stopped the query, else None."""
        if not self.steps:
            return None
        elapsed = time.monotonic() - self._started
        if self.used_kb is not None:
            return QueryTimeout(
                f"query stopped after {elapsed:.1f} s: its server process held {self.used_kb // 1024:,} MB, past "
                f"the console's limit of {self.memory_limit_kb // 1024:,} MB, so the console "
                f"{', then '.join(self.steps)}; it builds values too large: narrow it"
            )
        return QueryTimeout(
            f"query stopped after {elapsed:.1f} s: still running {CANCEL_AFTER_S:g} s past its "
            f"{self.timeout_s:g} s timeout, so the console {', then '.join(self.steps)}; "
            "narrow it or add a LIMIT"
        )

    def _watch(self) -> None:
        if self._sample_until(self._started + self.timeout_s + CANCEL_AFTER_S):
            return
        if self.used_kb is None:  # past its time, not its memory: a cancel first
            self.steps.append("cancelled it")
            self._aside(lambda: self.conn.cancel_safe(timeout=TERMINATE_AFTER_S))
            if self._done.wait(TERMINATE_AFTER_S):
                return
        self.steps.append(f"terminated its session (backend {self._pid})")
        self._aside(self._terminate)
        if self._done.wait(ABANDON_AFTER_S):
            return
        self.steps.append("closed the connection")
        _quietly(self._shut_socket)

    def _sample_until(self, deadline: float) -> bool:
        """Wait until ``deadline`` (False) or the query's end (True), sampling the backend's
        memory when it can be seen: past the limit, ``used_kb`` is set and False returned."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self.memory is None:
                return self._done.wait(left)
            if self._done.wait(min(left, SAMPLE_S)):
                return True
            used = self.memory.rss_anon_kb()
            if used is not None and used > self.memory_limit_kb:
                self.used_kb = used
                return False

    @staticmethod
    def _aside(action: Callable[[], object]) -> None:
        """Run ``action`` on a thread of its own: the watchdog's clock never waits on it."""
        threading.Thread(target=_quietly, args=(action,), name="kestrel-sql-hard-limit-step", daemon=True).start()

    def _terminate(self) -> None:
        options = {o.keyword.decode(): o.val.decode() for o in self.conn.pgconn.info if o.val is not None}
        options["connect_timeout"] = str(max(1, int(ABANDON_AFTER_S)))
        with psycopg.connect(make_conninfo(**options), autocommit=True) as other:
            other.execute(SQL.terminate, (self._pid,))

    def _shut_socket(self) -> None:
        # shutdown() on a duplicate of the descriptor ends the connection for the thread
        # waiting on it, without closing the descriptor libpq still owns.
        with socket.socket(fileno=os.dup(self.conn.pgconn.socket)) as sock:
            sock.shutdown(socket.SHUT_RDWR)


def _quietly(action: Callable[[], object]) -> None:
    try:
        action()
    except Exception:  # the next step (or the query's own error) covers what this one did not
        pass
