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
from kestrel_core.db.statements import render

# The outputs and results go in binary (%(name)b): in an array's text form every double quote
# of their JSON is escaped by a regular expression, which took 36 ms of the writer thread's CPU
# for a 20,000-key output against 5 ms in binary.
WRITE = """
WITH input AS (
    SELECT * FROM unnest(
        %(eids)s::bigint[], %(worker_ids)s::text[], %(claim_epochs)s::bigint[],
        %(finish_steps)s::text[], %(attempts)s::int[], %(started)s::timestamptz[],
        %(outputs)b::jsonb[], %(errors)s::text[], %(keeps)s::bool[], %(positions)s::int[],
        %(open_steps)s::text[], %(statuses)s::text[], %(results)b::jsonb[], %(failures)s::text[],
        %(fresh)s::bool[], %(elapsed)s::float8[]
    ) AS i(eid, worker_id, claim_epoch, fstep, attempt, started, output, error, keep, position, ostep,
           status, result, failure, fresh, elapsed)
), commit_mode AS (
    SELECT set_config('synchronous_commit', %(sync)s, true)
), mine AS (
    -- Each row by its primary key, locked in id order (a lock waits for a concurrent change
    -- and sees its result), then kept only while the claim is current: running, or paused
    -- under this claim (below). OFFSET 0 keeps the claim's conditions out of the probe: with
    -- them the planner may walk the partial index of every running row (and its dead entries)
    -- instead, for every batch.
    SELECT e.id, e.workflow_name, e.status, e.deadline_at
      FROM (SELECT eid, worker_id, claim_epoch FROM input ORDER BY eid) i
     CROSS JOIN LATERAL (
           SELECT x.id, x.workflow_name, x.owner_id, x.claim_epoch, x.status, x.deadline_at
             FROM {schema}.workflow_executions x WHERE x.id = i.eid
           OFFSET 0
              FOR NO KEY UPDATE) e
     WHERE e.owner_id = i.worker_id AND e.claim_epoch = i.claim_epoch AND e.status IN ('running', 'paused')
), fence AS (
    -- What goes on (an attempt opened, a completion) needs the execution running. The end of
    -- the step that was in flight when an operator paused it (pause_execution keeps the owner
    -- and the claim epoch) is still closed and checkpointed: a pause stops the execution at its
    -- next step boundary and keeps the step that ran (issue 43 review); a resume bumps nothing
    -- but the status, and the next claim the epoch, after which nothing of this claim is kept.
    -- Nor once the workflow's deadline passed: the step that ran is closed, nothing more starts
    -- nor completes, also before a deadline sweep got to it (it then ends it `timed out`).
    SELECT m.id, m.workflow_name FROM mine m
     WHERE m.status = 'running' AND (m.deadline_at IS NULL OR m.deadline_at > now())
), closed AS (
    UPDATE {schema}.step_attempts a
       SET outcome = CASE WHEN i.error IS NULL THEN 'success' ELSE 'error' END,
           finished_at = clock_timestamp(), error = i.error
      FROM input i JOIN mine f ON f.id = i.eid
     WHERE a.execution_id = i.eid AND a.step_id = i.fstep AND a.attempt = i.attempt
       AND a.outcome = 'running' AND NOT i.fresh
), ended_unopened AS (
    -- An attempt whose start was not written yet (the first step after a claim; group_commit.py)
    -- is written with its end: it started ``elapsed`` seconds (by the worker's clock) before now().
    INSERT INTO {schema}.step_attempts
           (execution_id, step_id, attempt, owner_id, claim_epoch, started_at, finished_at, outcome, error)
    SELECT i.eid, i.fstep, i.attempt, i.worker_id, i.claim_epoch,
           now() - make_interval(secs => i.elapsed), clock_timestamp(),
           CASE WHEN i.error IS NULL THEN 'success' ELSE 'error' END, i.error
      FROM input i JOIN mine f ON f.id = i.eid
     WHERE i.fresh
    ON CONFLICT DO NOTHING  -- this statement retried after its first try committed
), checkpoint AS (
    INSERT INTO {schema}.operation_outputs
           (execution_id, step_id, output, error, started_at, attempts, owner_id, claim_epoch, seq)
    SELECT i.eid, i.fstep, i.output, i.error,
           coalesce(i.started, now() - make_interval(secs => i.elapsed)), i.attempt, i.worker_id, i.claim_epoch,
           i.position
      FROM input i JOIN mine f ON f.id = i.eid
     WHERE i.keep
    ON CONFLICT DO NOTHING
    RETURNING execution_id
), reopened AS (
    -- The attempt this claim already has running for the step to open: only a retry of this
    -- statement whose first try committed finds one (a claim runs one attempt of a step at a
    -- time; the attempt this very row closes is not it). It is returned, not opened again.
    SELECT DISTINCT ON (i.eid) i.eid, a.attempt, a.started_at
      FROM input i JOIN fence f ON f.id = i.eid
      JOIN {schema}.step_attempts a ON a.execution_id = i.eid AND a.step_id = i.ostep
     WHERE a.owner_id = i.worker_id AND a.claim_epoch = i.claim_epoch AND a.outcome = 'running'
       AND (i.fstep IS DISTINCT FROM i.ostep OR a.attempt IS DISTINCT FROM i.attempt)
     ORDER BY i.eid, a.attempt DESC
), opened AS (
    INSERT INTO {schema}.step_attempts (execution_id, step_id, attempt, owner_id, claim_epoch)
    SELECT i.eid, i.ostep,
           greatest((SELECT max(a.attempt) FROM {schema}.step_attempts a
                      WHERE a.execution_id = i.eid AND a.step_id = i.ostep),
                    -- a retry opened with the end of an attempt written in this statement
                    CASE WHEN i.fresh AND i.fstep = i.ostep THEN i.attempt END, 0) + 1,
           i.worker_id, i.claim_epoch
      FROM input i JOIN fence f ON f.id = i.eid
     WHERE i.ostep IS NOT NULL AND NOT EXISTS (SELECT 1 FROM reopened r WHERE r.eid = i.eid)
    ON CONFLICT DO NOTHING
    RETURNING execution_id, attempt, started_at
), counters AS (
    -- The counters of finished executions the completions below bump (by a row trigger, at
    -- the end of the statement), locked first in one order (migration 0010).
    SELECT {schema}.lock_finished_counters(array_agg(k.workflow_name), array_agg(k.status),
                                           array_agg(k.shard)) AS locked
      FROM (SELECT DISTINCT f.workflow_name, i.status, {schema}.count_shard(f.id) AS shard
              FROM input i JOIN fence f ON f.id = i.eid WHERE i.status IS NOT NULL) k
), completed AS (
    UPDATE {schema}.workflow_executions e
       SET status = i.status, output = i.result, error = i.failure, lease_expires = NULL,
           finished_at = now(), updated_at = now()
      FROM input i JOIN fence f ON f.id = i.eid
     WHERE e.id = i.eid AND i.status IS NOT NULL
)
SELECT i.eid, f.id IS NOT NULL AS held, c.execution_id IS NOT NULL AS written,
       coalesce(o.attempt, r.attempt) AS opened, coalesce(o.started_at, r.started_at) AS opened_at
  FROM input i
  LEFT JOIN fence f ON f.id = i.eid
  LEFT JOIN checkpoint c ON c.execution_id = i.eid
  LEFT JOIN opened o ON o.execution_id = i.eid
  LEFT JOIN reopened r ON r.eid = i.eid
 CROSS JOIN commit_mode
 CROSS JOIN counters
"""

# A checkpoint not written (ON CONFLICT): the one that stands, and whose it is (an earlier try
# of this very write, retried after its commit went through, finds its own).
READ_CHECKPOINT = """
SELECT output, error, attempts, owner_id, claim_epoch FROM {schema}.operation_outputs
 WHERE execution_id = %(eid)s AND step_id = %(step)s
"""

# A completion refused by the fence: did our own earlier try of it commit before its
# connection broke (the write is retried)? Then the execution has our claim and that status.
COMPLETED_BY_US = """
SELECT status FROM {schema}.workflow_executions
 WHERE id = %(eid)s AND owner_id = %(worker_id)s AND claim_epoch = %(claim_epoch)s
"""


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
                render(READ_CHECKPOINT, schema), {"eid": b.execution_id, "step": b.finish.step_id}
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
        render(COMPLETED_BY_US, schema), {"eid": b.execution_id, "worker_id": b.worker_id, "claim_epoch": b.claim_epoch}
    ).fetchone()
    return bool(row and row[0] == b.complete.status)
