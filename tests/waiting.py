"""Polling helpers for tests that wait on real workers."""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float = 15.0, interval: float = 0.05, what: str = "condition") -> T:
    """Call ``check`` until it returns something truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last value: {value!r})")
        time.sleep(interval)


def wait_until_none_left(
    remaining: Callable[[], int | None], what: str, stall: float = 30.0, interval: float = 0.2
) -> None:
    """Wait until ``remaining()`` is 0, as long as it keeps falling: fail once it has not
    fallen for ``stall`` seconds. Lost work stalls; a loaded machine only drains slower, which
    a fixed deadline would take for a failure. None from ``remaining()`` (not readable now: the
    database restarting) is no progress."""
    lowest: int | None = None
    progress_at = time.monotonic()
    while (now := remaining()) != 0:
        if now is not None and (lowest is None or now < lowest):
            lowest, progress_at = now, time.monotonic()
        elif time.monotonic() - progress_at > stall:
            raise AssertionError(f"waiting for {what}: {lowest} left, none finished in the last {stall} s")
        time.sleep(interval)


def thread_stacks(prefix: str = "kestrel", frames: int = 8) -> str:
    """Where each live thread whose name starts with ``prefix`` is now (its innermost
    ``frames``): what a test that waited in vain for workers adds to its failure, so that a
    stuck runner shows what it is stuck in."""
    current = sys._current_frames()
    shown = []
    for thread in threading.enumerate():
        frame = current.get(thread.ident or -1)
        if thread.name.startswith(prefix) and frame is not None:
            shown.append(f"--- {thread.name}\n" + "".join(traceback.format_stack(frame)[-frames:]))
    return "\n".join(shown) or f"(no thread named {prefix}*)"


BLOCKED_ON_A_LOCK = """
SELECT a.pid FROM pg_stat_activity a
 WHERE a.datname = current_database() AND a.application_name = %s
   AND a.wait_event_type = 'Lock'
   AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted)
"""
BACKEND_ALIVE = "SELECT 1 FROM pg_stat_activity WHERE pid = %s"


def wait_until_blocked(conn: Any, application_name: str, timeout: float = 15.0) -> int:
    """The pid of a backend of ``application_name`` once it waits for a lock (pg_stat_activity
    says wait_event_type 'Lock' and pg_locks holds its ungranted request); ``conn`` is an
    autocommit connection to the same database, not the blocker."""

    def blocked() -> int | None:
        row = conn.execute(BLOCKED_ON_A_LOCK, (application_name,)).fetchone()
        return row[0] if row else None

    return wait_for(blocked, timeout=timeout, what=f"a session of {application_name!r} to wait on a lock")


def wait_until_gone(conn: Any, pid: int, timeout: float = 15.0) -> None:
    """Until backend ``pid`` has exited (after pg_terminate_backend)."""
    wait_for(
        lambda: conn.execute(BACKEND_ALIVE, (pid,)).fetchone() is None, timeout=timeout, what=f"backend {pid} to exit"
    )


def wait_finished(app: Any, eid: int, timeout: float = 20.0) -> Any:
    """Execution ``eid`` (``app.get``) once it has finished, whatever its end."""
    return wait_for(lambda: (e := app.get(eid)).done and e, timeout=timeout, what=f"execution {eid} to finish")


def wait_finished_row(db: Any, eid: int, timeout: float = 20.0) -> tuple[str, object]:
    """(status, output) of execution ``eid`` once it has succeeded or failed, read on ``db``
    (search_path kestrel)."""
    return wait_for(
        lambda: db.execute(
            "SELECT status, output FROM workflow_executions WHERE id = %s AND status IN ('success', 'error')", (eid,)
        ).fetchone(),
        timeout=timeout,
        what=f"execution {eid} to finish",
    )


def wait_leases_lapsed(conn: Any, ids: list[int], timeout: float = 30.0) -> None:
    """Until every execution of ``ids`` holds a lapsed lease (its worker frozen)."""
    wait_for(
        lambda: conn.execute(
            "SELECT bool_and(lease_expires < now()) FROM kestrel.workflow_executions WHERE id = ANY(%s)", (ids,)
        ).fetchone()[0],
        timeout=timeout,
        interval=0.2,
        what="the frozen worker's leases to lapse",
    )


def wait_all_succeeded(db: Any, ids: list[int], timeout: float, what: str) -> None:
    """Until every execution of ``ids`` has succeeded."""
    wait_for(
        lambda: db.execute(
            "SELECT count(*) = %s FROM kestrel.workflow_executions WHERE id = ANY(%s) AND status = 'success'",
            (len(ids), ids),
        ).fetchone()[0],
        timeout=timeout,
        what=what,
    )


def wait_waiting_child(db: Any, parent_id: int, what: str) -> int:
    """The id of ``parent_id``'s child once it waits (parked at a gate), read on ``db``."""
    row = wait_for(
        lambda: db.execute(
            "SELECT id FROM workflow_executions WHERE parent_id = %s AND status = 'waiting'", (parent_id,)
        ).fetchone(),
        what=what,
    )
    return int(row[0])


def wait_all_ended(conn: Any, ids: list[int], what: str, timeout: float = 30.0, interval: float = 0.05) -> None:
    """Until every execution of ``ids`` has succeeded or failed."""
    wait_for(
        lambda: (
            conn.execute(
                "SELECT count(*) FROM kestrel.workflow_executions"
                " WHERE id = ANY(%s) AND status IN ('success', 'error')",
                (ids,),
            ).fetchone()[0]
            == len(ids)
        ),
        timeout=timeout,
        interval=interval,
        what=what,
    )
