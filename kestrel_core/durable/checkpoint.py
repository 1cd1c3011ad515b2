"""Checkpoints: loading them for a replay, and the checkpoints that are not a step's.

Every write that advances an execution names the claim it acts under (owner_id + claim_epoch)
and only succeeds while that claim is current and the row is still ``running``. A worker that
was swept, cancelled or reclaimed (even under the same worker id) is refused: a zombie can never
checkpoint, park or complete what another now owns. A step's own checkpoint is written with
its step boundary, in batches (boundary.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import notify_channel, render

SQL = statements_beside(__file__)


@dataclass(frozen=True)
class Checkpoint:
    """What a finished step left: its output, or the error that failed it for good."""

    output: Any
    error: str | None = None
    attempts: int = 1
    position: int | None = None  # its position among the execution's durable operations (1-based)
    wait_kind: str | None = None  # the kind of the wait it resolved, if any ('approval', ...)
    decision: str | None = None  # that wait's decision and decider (approval gates)
    decided_by: str | None = None

    def backs(self, *, approved: bool, by: str | None, timed_out: bool) -> bool:
        """Whether the gate's wait row (written only by decide_approval and the sweep) records
        this decision: a checkpoint written any other way (a worker login's INSERT) is not."""
        if self.wait_kind != "approval":
            return False
        if timed_out:
            return self.decision == "timed_out"
        return self.decision == ("approved" if approved else "rejected") and self.decided_by == by


@dataclass(frozen=True, slots=True)
class Fence:
    """Where one durable operation writes: the execution, the claim that fences the write
    (owner and epoch: a write under a claim no longer current changes nothing), and the
    operation's step id and position among the execution's durable operations."""

    execution_id: int
    worker_id: str
    claim_epoch: int
    step_id: str
    position: int

    def params(self, **more: Any) -> dict[str, Any]:
        """A fenced statement's parameters: these, named as the statements name them, and ``more``."""
        return {
            "eid": self.execution_id,
            "worker_id": self.worker_id,
            "claim_epoch": self.claim_epoch,
            "step": self.step_id,
            "position": self.position,
            **more,
        }


def load(
    conn: psycopg.Connection, schema: str, execution_id: int, *, worker_id: str, claim_epoch: int
) -> dict[str, Checkpoint] | None:
    """Every checkpoint of an execution, by step id, read under the claim (worker_id, claim_epoch);
    None when that claim is no longer current."""
    rows = conn.execute(
        render(SQL.load, schema), {"eid": execution_id, "worker_id": worker_id, "claim_epoch": claim_epoch}
    ).fetchall()
    if not rows:
        return None
    return {row[0]: Checkpoint(*row[1:]) for row in rows if row[0] is not None}


def record(conn: psycopg.Connection, schema: str, at: Fence, output: Jsonb, error: str | None = None) -> bool:
    """Write a checkpoint that is not a step's; False when the claim is no longer ours.

    With ``error`` it counts as failed: a requeue deletes it and the replay looks again."""
    row = conn.execute(render(SQL.record, schema), at.params(output=output, error=error)).fetchone()
    return bool(row and row[0])


def release(conn: psycopg.Connection, schema: str, execution_id: int, *, worker_id: str, claim_epoch: int) -> bool:
    """Re-enqueue an execution held under the claim (worker_id, claim_epoch); False when that
    claim is no longer current (nothing changed)."""
    rows = conn.execute(
        render(SQL.release, schema),
        {"eid": execution_id, "worker_id": worker_id, "claim_epoch": claim_epoch, "channel": notify_channel(schema)},
    ).fetchall()
    return bool(rows)
