"""Step checkpoints and attempts, fenced by the claim.

Every write that advances an execution names the claim it acts under (owner_id + claim_epoch)
and only succeeds while that claim is current and the row is still ``running``. A worker that
was swept, cancelled or reclaimed (even under the same owner id) is refused: a zombie can never
checkpoint, park or complete what another now owns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from .statements import render

# On a replay: read every checkpoint once (this worker is the only writer while it holds the
# claim, so the copy stays true), and close attempts a dead worker left open.
LOAD = """
WITH abandoned AS (
    UPDATE {schema}.step_attempts
       SET outcome = 'error', finished_at = clock_timestamp(),
           error = 'abandoned: its worker stopped before finishing (killed, lost its lease, or shut down)'
     WHERE execution_id = %(eid)s AND outcome = 'running'
)
SELECT step_id, output, error, attempts, seq FROM {schema}.operation_outputs WHERE execution_id = %(eid)s
"""

START_ATTEMPT = """
INSERT INTO {schema}.step_attempts (execution_id, step_id, attempt, owner_id, claim_epoch)
SELECT e.id, %(step)s,
       coalesce((SELECT max(a.attempt) FROM {schema}.step_attempts a
                  WHERE a.execution_id = e.id AND a.step_id = %(step)s), 0) + 1,
       %(owner)s, %(epoch)s
  FROM (SELECT id FROM {schema}.workflow_executions WHERE {claim_is_current}) e, {async_commit}
RETURNING id, attempt, started_at
"""

# A failed attempt that will be retried: only our own attempt row changes.
FAIL_ATTEMPT = """
UPDATE {schema}.step_attempts SET outcome = 'error', finished_at = clock_timestamp(), error = %(error)s
  FROM {async_commit}
 WHERE id = %(attempt_id)s
"""

# The checkpoint: fenced (the execution row is locked for the statement, so a concurrent sweep
# or cancel waits for us or wins first), written once (ON CONFLICT DO NOTHING), and the attempt
# closed, in one round trip.
FINISH_STEP = """
WITH fence AS (
    {lock_if_claim_is_current}
), checkpoint AS (
    INSERT INTO {schema}.operation_outputs
           (execution_id, step_id, output, error, started_at, attempts, owner_id, seq)
    SELECT id, %(step)s, %(output)s, %(error)s, %(started_at)s, %(attempts)s, %(owner)s, %(seq)s
      FROM fence
    ON CONFLICT DO NOTHING
    RETURNING output, error
), attempt AS (
    UPDATE {schema}.step_attempts
       SET outcome = %(outcome)s, finished_at = clock_timestamp(), error = %(error)s
     WHERE id = %(attempt_id)s AND EXISTS (SELECT 1 FROM fence)
)
SELECT EXISTS (SELECT 1 FROM fence), EXISTS (SELECT 1 FROM checkpoint),
       (SELECT output FROM checkpoint), (SELECT error FROM checkpoint)
"""

# A checkpoint that is not a step's (a child started, children awaited): fenced, written once.
RECORD = """
WITH fence AS (
    {lock_if_claim_is_current}
), checkpoint AS (
    INSERT INTO {schema}.operation_outputs (execution_id, step_id, output, error, owner_id, seq)
    SELECT id, %(step)s, %(output)s, %(error)s, %(owner)s, %(seq)s FROM fence
    ON CONFLICT DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM fence)
"""

READ_ONE = """
SELECT output, error FROM {schema}.operation_outputs WHERE execution_id = %(eid)s AND step_id = %(step)s
"""


@dataclass(frozen=True)
class Checkpoint:
    """What a finished step left: its output, or the error that failed it for good."""

    output: Any
    error: str | None = None
    attempts: int = 1
    seq: int | None = None  # its position among the execution's durable operations (1-based)


@dataclass(frozen=True)
class Attempt:
    id: int
    number: int
    started_at: datetime


def load(conn: psycopg.Connection, schema: str, execution_id: int) -> dict[str, Checkpoint]:
    """Every checkpoint of an execution, by step id."""
    rows = conn.execute(render(LOAD, schema), {"eid": execution_id}).fetchall()
    return {step: Checkpoint(output, error, attempts, seq) for step, output, error, attempts, seq in rows}


def start_attempt(conn: psycopg.Connection, schema: str, *, execution_id: int, step_id: str,
                  owner: str, epoch: int) -> Attempt | None:
    """Record the start of an attempt; None when the claim is no longer ours."""
    row = conn.execute(render(START_ATTEMPT, schema), {
        "eid": execution_id, "step": step_id, "owner": owner, "epoch": epoch,
    }).fetchone()
    return None if row is None else Attempt(*row)


def fail_attempt(conn: psycopg.Connection, schema: str, attempt_id: int, error: str) -> None:
    conn.execute(render(FAIL_ATTEMPT, schema), {"attempt_id": attempt_id, "error": error})


def finish_step(
    conn: psycopg.Connection, schema: str, *, execution_id: int, step_id: str, owner: str,
    epoch: int, attempt: Attempt, output: Jsonb | None, error: str | None, seq: int | None = None,
) -> Checkpoint | None:
    """Write the step's checkpoint under the claim.

    Returns the checkpoint that stands (ours, or the one that won a race), or None when the
    claim is no longer ours and nothing was written.
    """
    row = conn.execute(render(FINISH_STEP, schema), {
        "eid": execution_id, "step": step_id, "owner": owner, "epoch": epoch,
        "output": output, "error": error, "started_at": attempt.started_at,
        "attempts": attempt.number, "outcome": "error" if error is not None else "success",
        "attempt_id": attempt.id, "seq": seq,
    }).fetchone()
    assert row is not None
    owned, inserted, stored_output, stored_error = row
    if not owned:
        return None
    if inserted:
        return Checkpoint(stored_output, stored_error, attempt.number, seq)
    existing = conn.execute(render(READ_ONE, schema), {"eid": execution_id, "step": step_id}).fetchone()
    assert existing is not None, "ON CONFLICT means a checkpoint exists"
    return Checkpoint(existing[0], existing[1], seq=seq)


def record(conn: psycopg.Connection, schema: str, *, execution_id: int, step_id: str, owner: str,
           epoch: int, seq: int, output: Jsonb, error: str | None = None) -> bool:
    """Write a checkpoint that is not a step's; False when the claim is no longer ours.

    With ``error`` it counts as failed: a requeue deletes it and the replay looks again."""
    row = conn.execute(render(RECORD, schema), {
        "eid": execution_id, "step": step_id, "owner": owner, "epoch": epoch, "seq": seq,
        "output": output, "error": error,
    }).fetchone()
    return bool(row and row[0])
