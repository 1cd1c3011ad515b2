"""Group commit: the step boundaries of many executions, one statement and one commit.

Runner threads hand their boundary to ``GroupCommit.submit`` and block; one writer thread
takes every boundary waiting at that moment (at most one per execution, up to ``max_batch``)
and writes them with ``boundary.write``. There is no timer: a lone boundary is written at once
(no added latency when idle), and under load the boundaries that arrive while one batch is in
flight form the next one, so the batch grows with the load and commits per workflow fall
below one.

A batch the database refuses for a reason other than a lost connection (a bug, a value it
will not store) is split and its boundaries written one by one, so one bad row fails only
its own execution.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import TypeVar

import psycopg

from . import boundary
from .boundary import Boundary, Outcome

T = TypeVar("T")

log = logging.getLogger("kestrel.group_commit")

Run = Callable[[Callable[[psycopg.Connection], T]], T]


class _Pending:
    """One submitted boundary, until its outcome is known."""

    __slots__ = ("boundary", "done", "outcome", "error")

    def __init__(self, b: Boundary) -> None:
        self.boundary = b
        self.done = threading.Event()
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None


class GroupCommit:
    """Batches step boundaries across executions; ``run(fn)`` runs ``fn`` on a connection
    (the worker's ``db``, which retries while the database is unreachable)."""

    def __init__(self, run: Run, schema: str, *, max_batch: int = 256, name: str = "kestrel-group-commit") -> None:
        self._run = run
        self._schema = schema
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._carry: list[_Pending] = []  # a second boundary of an execution already in the batch
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

    def submit(self, b: Boundary) -> Outcome:
        """Write ``b`` with the next batch and return its outcome; raises what the write raised."""
        if self._closed:
            raise psycopg.OperationalError("the worker is stopping: no more writes")
        pending = _Pending(b)
        self._queue.put(pending)
        while not pending.done.wait(1.0):
            if not self._thread.is_alive():  # stopped between our check and our put
                raise psycopg.OperationalError("the worker is stopping: no more writes")
        if pending.error is not None:
            raise pending.error
        assert pending.outcome is not None
        return pending.outcome

    def _loop(self) -> None:
        stopping = False
        while not stopping or self._carry:
            batch, stopping = self._take(stopping)
            if batch:
                self._write(batch)

    def _take(self, stopping: bool) -> tuple[list[_Pending], bool]:
        """The next batch: carried-over boundaries first, then all that are waiting (blocking
        for the first one only)."""
        taken: dict[int, _Pending] = {}
        carry, self._carry = self._carry, []
        for p in carry:
            self._add(taken, p)
        block = not taken and not stopping
        while len(taken) < self.max_batch:
            try:
                item = self._queue.get(block=block)
            except queue.Empty:
                break
            block = False
            if item is None:
                stopping = True
                continue
            self._add(taken, item)
        return list(taken.values()), stopping

    def _add(self, taken: dict[int, _Pending], p: _Pending) -> None:
        eid = p.boundary.execution_id
        if eid in taken or len(taken) >= self.max_batch:
            self._carry.append(p)
        else:
            taken[eid] = p

    def _write(self, batch: list[_Pending]) -> None:
        try:
            outcomes = self._run(lambda c: boundary.write(c, self._schema, [p.boundary for p in batch]))
        except psycopg.OperationalError as exc:  # the database stayed away past the retry window
            for p in batch:
                self._resolve(p, error=exc)
            return
        except Exception as exc:
            if len(batch) == 1:
                self._resolve(batch[0], error=exc)
                return
            log.warning("event=batch_refused boundaries=%s error=%r (writing them one by one)",
                        len(batch), str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
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
