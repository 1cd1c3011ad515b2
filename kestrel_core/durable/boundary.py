"""Step boundaries of many executions in one fenced statement (what group commit writes).

A step boundary is everything an execution writes between two steps, in one row: close the
attempt that just ended (and checkpoint it when it is final), open the next step's attempt,
or complete the execution. ``write`` takes the boundaries of many executions (one row each)
and writes them with ONE statement, so in autocommit ONE commit:

- the fence is per row: each execution's row is locked only while its claim (owner_id,
  claim_epoch) is current and it is running; a row whose claim was lost writes nothing at all
  (no checkpoint, no attempt, no completion), while the other rows of the batch go on; a row
  an operator paused under this claim writes the end of the step it ran, and nothing more;
- checkpoints are ``INSERT ... ON CONFLICT DO NOTHING``: written once;
- each row learns its own outcome (``Outcome``): fenced out, written, or lost the race; a
  row that asks for nothing (no finish, no open, no completion) only learns whether its claim
  is current: the fence of a first step reached after its claim stopped being fresh.

The statement commits durably when any row checkpoints or completes; a batch that only opens
or closes attempts (bookkeeping) commits without waiting for the WAL flush, like
``{async_commit}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core.base.serialization import as_stored
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import render

SQL = statements_beside(__file__)
# Exported (WRITE_BOUNDARIES), and replaced by the chaos run's mutation test.
WRITE = SQL.write


@dataclass(frozen=True)
class Attempt:
    """An attempt of a step, as opened: its number (1, 2, ...) and when it started (None: its
    start is not written yet; it will be written with its end, see ``Finish.elapsed``)."""

    number: int
    started_at: datetime | None


@dataclass(frozen=True)
class Finish:
    """The end of a step's attempt. ``keep``: it is final, checkpoint it (output or error);
    otherwise only the attempt is closed (it failed and will be retried)."""

    step_id: str
    attempt: Attempt
    output: Jsonb | None = None
    error: str | None = None
    keep: bool = True
    position: int | None = None
    elapsed: float | None = None  # seconds since the attempt started, when its start is unwritten


@dataclass(frozen=True)
class Completion:
    """The execution's end: ``status`` 'success' (with ``output``) or 'error' (with ``error``)."""

    status: str
    output: Jsonb | None = None
    error: str | None = None


@dataclass(frozen=True)
class Boundary:
    """What one execution writes at one step boundary, under its claim."""

    execution_id: int
    worker_id: str
    claim_epoch: int
    finish: Finish | None = None
    open_step: str | None = None
    complete: Completion | None = None

    @property
    def durable(self) -> bool:
        """Whether it must survive a server crash once acknowledged (checkpoint or completion)."""
        return self.complete is not None or (self.finish is not None and self.finish.keep)


@dataclass(frozen=True)
class Outcome:
    """What one boundary of a batch did.

    ``held``: the claim was current, so everything asked was written (else nothing was).
    ``written``: the checkpoint asked for is ours (also when an earlier try of this write, whose
    answer was lost with its connection, committed it); else ``checkpoint`` is the one written first.
    ``opened``: the attempt opened. ``completed``: the execution has the asked status under our
    claim (also true when an earlier try of this write committed).
    """

    held: bool
    written: bool = False
    opened: Attempt | None = None
    completed: bool = False
    existing: tuple[Any, str | None, int] | None = None  # the checkpoint that stood first
    mine: Finish | None = field(default=None, repr=False, compare=False)

    @property
    def checkpoint(self) -> tuple[Any, str | None, int] | None:
        """The checkpoint that stands, when one was asked: ours (computed only when read: the
        writer thread never pays for it), or the one that won the race."""
        if self.existing is not None or self.mine is None:
            return self.existing
        return as_stored(self.mine.output), self.mine.error, self.mine.attempt.number


def _params(batch: Sequence[Boundary]) -> dict[str, Any]:
    """The statement's parameters: one array per column, one element per boundary."""
    fin = [b.finish for b in batch]
    done = [b.complete for b in batch]
    return {
        "eids": [b.execution_id for b in batch],
        "worker_ids": [b.worker_id for b in batch],
        "claim_epochs": [b.claim_epoch for b in batch],
        "open_steps": [b.open_step for b in batch],
        "finish_steps": [f and f.step_id for f in fin],
        "attempts": [f and f.attempt.number for f in fin],
        "started": [f and f.attempt.started_at for f in fin],
        "fresh": [bool(f and f.attempt.started_at is None) for f in fin],
        "elapsed": [f and f.elapsed for f in fin],
        "outputs": [f and f.output for f in fin],
        "errors": [f and f.error for f in fin],
        "keeps": [bool(f and f.keep) for f in fin],
        "positions": [f and f.position for f in fin],
        "statuses": [c and c.status for c in done],
        "results": [c and c.output for c in done],
        "failures": [c and c.error for c in done],
        "sync": "on" if any(b.durable for b in batch) else "off",
    }


def write(conn: psycopg.Connection, schema: str, batch: Sequence[Boundary]) -> list[Outcome]:
    """Write the boundaries of ``batch`` (at most one per execution) in one statement;
    one Outcome per boundary, in order."""
    if len({b.execution_id for b in batch}) != len(batch):
        raise ValueError("a batch holds at most one boundary per execution")
    if not batch:
        return []
    rows = {row[0]: row for row in conn.execute(render(WRITE, schema), _params(batch)).fetchall()}
    return [_outcome(conn, schema, b, rows[b.execution_id]) for b in batch]


def _outcome(conn: psycopg.Connection, schema: str, b: Boundary, row: tuple[Any, ...]) -> Outcome:
    _, held, written, opened_number, opened_at = row
    if not held:
        completed = b.complete is not None and _completed_earlier(conn, schema, b)
        return Outcome(held=False, completed=completed)
    existing = mine = None
    if b.finish is not None and b.finish.keep:
        if not written:
            found = conn.execute(
                render(SQL.read_checkpoint, schema), {"eid": b.execution_id, "step": b.finish.step_id}
            ).fetchone()
            if found is None:
                # Gone since the insert met it (a requeue deletes failed checkpoints): the record
                # moved on without this claim; stop as if fenced out, the replay reads it afresh.
                return Outcome(held=False)
            output, error, attempts, worker_id, claim_epoch = found
            written = (worker_id, claim_epoch, attempts) == (b.worker_id, b.claim_epoch, b.finish.attempt.number)
            if not written:
                existing = (output, error, attempts)
        if written:
            mine = b.finish
    opened = Attempt(opened_number, opened_at) if opened_number is not None else None
    return Outcome(
        held=True, written=bool(written), opened=opened, completed=b.complete is not None, existing=existing, mine=mine
    )


def _completed_earlier(conn: psycopg.Connection, schema: str, b: Boundary) -> bool:
    if b.complete is None:
        return False
    row = conn.execute(
        render(SQL.completed_by_us, schema),
        {"eid": b.execution_id, "worker_id": b.worker_id, "claim_epoch": b.claim_epoch},
    ).fetchone()
    return bool(row and row[0] == b.complete.status)
