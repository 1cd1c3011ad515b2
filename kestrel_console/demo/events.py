"""What the headless demo prints: one short line per event, and a periodic summary by status.

Events come from the trickle, the bot operator and the workers' log records (``event=...``
key=value lines from the ``kestrel.worker`` logger). With the TUI open nothing is printed:
:func:`silence_engine_logs` keeps the workers' warnings off the screen.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

import psycopg

from kestrel_core import STATUSES, Kestrel, KestrelError, mask_dsn
from kestrel_core.db import one_row, render, statements_beside

SQL = statements_beside(__file__)

ENGINE_LOGGER = "kestrel"
DRIVER_LOGGER = "psycopg"  # the pools warn there when the database goes away


_FIELD = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\S+)")
_QUIET_EVENTS = {"claimed", "worker_started", "worker_stopped", "shutdown_requested", "waits_due"}


class EventPrinter:
    """Prints timestamped lines to ``out``, from any thread, passwords masked."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self._lock = threading.Lock()
        # Execution id -> seconds from its start to its finish (set once the demo's app runs).
        self.run_time: Callable[[int], float | None] | None = None

    def __call__(self, text: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {mask_dsn(text)}"
        with self._lock:
            print(line, file=self.out, flush=True)

    def summary(self, app: Kestrel) -> None:
        """One line: how many executions are in each status, and open approvals."""
        try:
            with app.connection() as conn:
                counts = dict(conn.execute(render(SQL.status_counts, app.schema)).fetchall())
                row = conn.execute(render(SQL.pending_approvals, app.schema)).fetchone()
                pending = one_row(row, "pending_approvals")[0]
        except (KestrelError, psycopg.Error) as exc:
            self(f"summary unavailable: {str(exc).strip()}")
            return
        parts = [f"{status} {counts.get(status, 0)}" for status in STATUSES]
        self(f"summary: {', '.join(parts)}; approvals pending {pending}")


class WorkerEventHandler(logging.Handler):
    """Turns the workers' ``event=...`` log records into short demo lines."""

    def __init__(self, printer: EventPrinter) -> None:
        super().__init__(logging.INFO)
        self.printer = printer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = describe_worker_event(record.getMessage(), record.levelno, self.printer.run_time)
        except Exception:  # never let a log line break a worker
            return
        if line:
            self.printer(line)


def describe_worker_event(
    message: str, level: int = logging.INFO, run_time: Callable[[int], float | None] | None = None
) -> str | None:
    """A short line for one worker log message, or None for routine ones.

    A finished execution's time is its whole run (``run_time``: start to finish, waits
    included); the log's own duration_s is only the last claim's, 0.0 s after a wait.
    """
    fields = {key: value.strip("'\"") for key, value in _FIELD.findall(message)}
    event = fields.get("event")
    if event is None or (event in _QUIET_EVENTS and level < logging.WARNING):
        return None
    eid, workflow = fields.get("execution_id", "?"), fields.get("workflow", "")
    if event == "finished":
        # The database's start and finish; the log's own clock only when the row is not found.
        whole = run_time(int(eid)) if run_time is not None and eid.isdigit() else None
        took = whole if whole is not None else float(fields.get("duration_s", 0))
        error = f": {fields['error']}" if "error" in fields else ""
        return f"{fields.get('status', '?'):<7} #{eid} {workflow} in {took:.1f}s{error}"
    if event == "parked":
        return f"waiting #{eid} {workflow} (durable sleep or approval gate)"
    if event == "step_retry":
        return (
            f"retry   #{eid} step {fields.get('step')} attempt {fields.get('attempt')} failed, "
            f"retrying in {float(fields.get('delay_s', 0)):.1f}s"
        )
    return message if level >= logging.WARNING else None


@contextmanager
def worker_events_printed(printer: EventPrinter) -> Iterator[None]:
    """Print worker events through ``printer`` while inside, instead of the default logging."""
    with _engine_logger(WorkerEventHandler(printer), logging.INFO):
        yield


@contextmanager
def silence_engine_logs() -> Iterator[None]:
    """Keep engine and driver log lines off the terminal while inside (the TUI owns the screen)."""
    with (
        _engine_logger(logging.NullHandler(), logging.CRITICAL),
        _engine_logger(logging.NullHandler(), logging.CRITICAL, DRIVER_LOGGER),
    ):
        yield


@contextmanager
def _engine_logger(handler: logging.Handler, level: int, name: str = ENGINE_LOGGER) -> Iterator[None]:
    logger = logging.getLogger(name)
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
