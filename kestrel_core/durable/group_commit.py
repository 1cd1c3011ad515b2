"""Group commit: the step boundaries of many executions, one statement and one commit.

Runner threads hand their boundary to ``GroupCommit.submit`` and block; one writer thread
takes every boundary waiting at that moment (at most one per execution, up to ``max_batch``)
and writes them with ``boundary.write``. There is no timer: a lone boundary is written at once
(no added latency when idle), and under load the boundaries that arrive while one batch is in
flight form the next one, so the batch grows with the load and commits per workflow fall
below one.

The first step of an execution's first claim does not wait for its attempt's start to be
written (``open_lazily``): its fence is the claim while that is fresh, else a row that writes
nothing and only asks whether the claim is current (context.py, ``_open``). The start waits here
up to ``LAZY_OPEN_S``; if the step's end arrives first, both become ONE row (the attempt is
written with its end), so a quick first step costs no write of its own. A longer step has its
start written when the wait is over, so the console shows it running.

A batch the database refuses for a reason other than a lost connection (a bug, a value it
will not store, a statement timeout, a deadlock that outlived its retries) is split and its
boundaries written one by one, so one bad row fails only its own execution (the rule is the
connection seam's: db/retry.py, ``RETRY.splits``).
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time

import psycopg

from kestrel_core.base.latch import Latch
from kestrel_core.db.connection import ConnectionRunner
from kestrel_core.db.retry import RETRY
from kestrel_core.durable import boundary
from kestrel_core.durable.boundary import Attempt, Boundary, Outcome

log = logging.getLogger("kestrel.group_commit")

Run = ConnectionRunner  # the worker's ``db``

# How long a lazily opened attempt waits for its own end before its start is written alone.
LAZY_OPEN_S = 0.02


class _Pending:
    """One submitted boundary, until its outcome is known."""

    __slots__ = ("after", "at", "boundary", "done", "error", "lazy", "outcome")

    def __init__(self, b: Boundary, *, lazy: bool = False, after: _Pending | None = None) -> None:
        self.boundary = b
        self.done = Latch()
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None
        self.lazy = lazy  # an attempt's start that may wait for its end (open_lazily)
        self.after = after  # the lazy start this boundary ends
        self.at = time.monotonic()


LazyOpen = _Pending  # what open_lazily returns, to pass back to submit


class GroupCommit:
    """Batches step boundaries across executions; ``run(fn)`` runs ``fn`` on a connection
    (the worker's ``db``, which retries while the database is unreachable)."""

    def __init__(self, run: Run, schema: str, *, max_batch: int = 256, name: str = "kestrel-group-commit") -> None:
        self._run = run
        self._schema = schema
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._carry: list[_Pending] = []  # a second boundary of an execution already in the batch
        self._lazy: dict[int, _Pending] = {}  # lazy starts not written yet, by execution (writer thread only)
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.stats = {"batches": 0, "boundaries": 0, "largest": 0}

    def start(self) -> GroupCommit:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Write what was submitted, then end the writer thread."""
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout)

    def submit(self, b: Boundary, *, after: LazyOpen | None = None) -> Outcome:
        """Write ``b`` with the next batch and return its outcome; raises what the write raised.
        ``after``: the lazy start of the attempt ``b`` ends (see ``open_lazily``)."""
        if self._closed:
            raise psycopg.OperationalError("the worker is stopping: no more writes")
        pending = _Pending(b, after=after)
        self._queue.put(pending)
        while not pending.done.wait(1.0):
            if not self._thread.is_alive():  # stopped between our check and our put
                raise psycopg.OperationalError("the worker is stopping: no more writes")
        if pending.error is not None:
            raise pending.error
        if pending.outcome is None:  # _resolve sets one of the two; checked also under -O
            raise psycopg.InternalError("group commit resolved a boundary with neither outcome nor error")
        return pending.outcome

    def open_lazily(self, b: Boundary) -> LazyOpen:
        """Queue an attempt's start (``b.open_step``, attempt 1) without waiting for it; pass the
        handle as ``after`` when submitting the attempt's end."""
        if self._closed:
            raise psycopg.OperationalError("the worker is stopping: no more writes")
        pending = _Pending(b, lazy=True)
        self._queue.put(pending)
        return pending

    def _loop(self) -> None:
        stopping = False
        while not stopping or self._carry or self._lazy:
            batch, stopping = self._take(stopping)
            if batch:
                self._write(batch)

    def _take(self, stopping: bool) -> tuple[list[_Pending], bool]:
        """The next batch: carried-over boundaries first, then all that are waiting (blocking
        for the first one only, and no longer than the oldest lazy start may wait)."""
        taken: dict[int, _Pending] = {}
        carry, self._carry = self._carry, []
        for p in carry:
            self._add(taken, p)
        block = not taken and not stopping
        while len(taken) < self.max_batch:
            timeout = None
            if block and self._lazy:
                timeout = max(0.0, min(p.at for p in self._lazy.values()) + LAZY_OPEN_S - time.monotonic())
            try:
                item = self._queue.get(block=block, timeout=timeout)
            except queue.Empty:
                break
            block = False
            if item is None:
                stopping = True
                continue
            self._add(taken, item)
        now = time.monotonic()
        for eid, lazy in list(self._lazy.items()):  # starts that waited long enough go alone
            if (stopping or now - lazy.at >= LAZY_OPEN_S) and eid not in taken and len(taken) < self.max_batch:
                taken[eid] = self._lazy.pop(eid)
        return list(taken.values()), stopping

    def _add(self, taken: dict[int, _Pending], p: _Pending) -> None:
        eid = p.boundary.execution_id
        if p.lazy:
            self._lazy[eid] = p
            return
        if (
            eid in taken
            or len(taken) >= self.max_batch
            or (p.after is not None and not p.after.done.is_set() and self._lazy.get(eid) is not p.after)
        ):
            self._carry.append(p)  # after the boundary of this execution already in the batch
            return
        lazy = self._lazy.pop(eid, None)
        if lazy is not None and lazy is not p.after:
            taken[eid] = lazy  # another write of this execution: its start goes first
            self._carry.append(p)
            return
        if p.after is not None:
            p.boundary = _ended(p.boundary, p.after, merged=lazy is not None)
            if lazy is not None:
                lazy.boundary = p.boundary
                p.after = lazy  # resolved with this boundary's outcome
        taken[eid] = p

    def _write(self, batch: list[_Pending]) -> None:
        try:
            outcomes = self._run(lambda c: boundary.write(c, self._schema, [p.boundary for p in batch]))
        except Exception as exc:
            if not RETRY.splits(exc) or len(batch) == 1:  # away past the retry window, or this row's own
                for p in batch:
                    self._resolve(p, error=exc)
                return
            log.warning(
                "event=batch_refused boundaries=%s error=%r (writing them one by one)",
                len(batch),
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            )
            for p in batch:
                self._write([p])
            return
        self.stats["batches"] += 1
        self.stats["boundaries"] += len(batch)
        self.stats["largest"] = max(self.stats["largest"], len(batch))
        for p, outcome in zip(batch, outcomes):
            self._resolve(p, outcome=outcome)

    @staticmethod
    def _resolve(p: _Pending, *, outcome: Outcome | None = None, error: BaseException | None = None) -> None:
        p.outcome, p.error = outcome, error
        p.done.set()
        if p.after is not None and not p.after.done.is_set():  # a lazy start written with its end
            p.after.outcome, p.after.error = outcome, error
            p.after.done.set()


def _ended(b: Boundary, lazy: _Pending, *, merged: bool) -> Boundary:
    """``b``, whose finish ends the lazily started attempt ``lazy``: with the start's time once
    it was written, else (``merged``, or the start's write failed) written with its end."""
    f = b.finish
    if f is None or f.attempt.started_at is not None:
        return b  # nothing of the lazy start to carry: it ends no unwritten attempt
    opened = lazy.outcome.opened if (not merged and lazy.outcome is not None) else None
    if opened is not None:
        attempt = Attempt(f.attempt.number, opened.started_at)
        return dataclasses.replace(b, finish=dataclasses.replace(f, attempt=attempt))
    return dataclasses.replace(b, finish=dataclasses.replace(f, elapsed=time.monotonic() - lazy.at))
