"""Child workflows: start one durably and once, park until children finish.

Starting a child is a checkpointed operation of the parent: one fenced statement inserts the
child (engine key ``child:{parent_id}:{step_id}``, in a column no user key reaches: see
kestrel_core.dispatch.keys) and the parent's checkpoint holding its id, so a replay returns the same
child and never starts a second one.

Waiting parks the parent on a ``workflow_waits`` row of kind ``child`` listing the children it
waits for. The trigger ``execution_finished`` (migration 0008) resolves it and re-enqueues the
parent in the transaction that finishes the last of them. Parking locks the live children
(FOR SHARE): a child finishing at that moment either commits first (the park sees it finished
and does not park) or waits for the park to commit (and then sees the wait and wakes it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core.base import tracing
from kestrel_core.base.statuses import LIVE_STATUSES
from kestrel_core.db.statements import notify_channel, one_row, render
from kestrel_core.dispatch import keys
from kestrel_core.dispatch.enqueue import PLACE_ONE, EnqueueOptions
from kestrel_core.durable.checkpoint import Fence

# Placed like any enqueue (enqueue.PLACE_ONE: the given queue, else the workflow's bound queue,
# else the default; priority defaults to the queue's; a keyed child marks its queue keyed).
# A child already started (its engine key taken) is skipped by the key trigger
# (execution_key_taken) and found in execution_keys.
START_CHILD = (
    PLACE_ONE
    + """, fence AS (
    {lock_if_claim_is_current}
), child AS (
    INSERT INTO {schema}.workflow_executions
           (workflow_name, input, engine_key, run_at, priority, queue, concurrency_key, version,
            parent_id, trace_context)
    SELECT %(name)s, %(input)s, %(key)s, coalesce(%(run_at)s, now()), p.priority, p.queue, %(ckey)s,
           %(version)s, fence.id, %(trace)s
      FROM fence, placed p
    RETURNING id
), found AS (
    SELECT id FROM child
    UNION ALL
    SELECT execution_id FROM {schema}.execution_keys
     WHERE key = %(key)s AND NOT EXISTS (SELECT 1 FROM child)
       AND EXISTS (SELECT 1 FROM fence)
), checkpoint AS (
    INSERT INTO {schema}.operation_outputs (execution_id, step_id, output, owner_id, seq)
    SELECT %(eid)s, %(step)s,
           jsonb_build_object('child_id', found.id, 'workflow', %(name)s::text), %(worker_id)s, %(position)s
      FROM found
    ON CONFLICT DO NOTHING
), woke AS (
    SELECT pg_notify(%(channel)s, %(name)s) FROM child
)
SELECT EXISTS (SELECT 1 FROM fence), (SELECT id FROM found), (SELECT count(*) FROM woke)
"""
)

CHILDREN = """
SELECT id, workflow_name, status, output, error FROM {schema}.workflow_executions
 WHERE parent_id = %(eid)s
"""

# Park on the children still live once locked; nothing is written when none is. Only this
# execution's own children count: only their completion wakes it.
PARK_ON_CHILDREN = """
WITH fence AS (
    {lock_if_claim_is_current}
), live AS (
    SELECT id FROM {schema}.workflow_executions
     WHERE id = ANY(%(ids)s) AND parent_id = %(eid)s AND status IN {live_statuses}
       AND EXISTS (SELECT 1 FROM fence)
     ORDER BY id
       FOR SHARE
), wait AS (
    INSERT INTO {schema}.workflow_waits (execution_id, step_id, kind, wake_at, details, seq)
    SELECT %(eid)s, %(step)s, 'child', now() + %(after)s::interval, %(details)s, %(position)s
     WHERE EXISTS (SELECT 1 FROM live)
    ON CONFLICT (execution_id, step_id) DO UPDATE SET resolved_at = NULL, details = EXCLUDED.details
     WHERE {schema}.workflow_waits.decision IS NULL
), parked AS (
    UPDATE {schema}.workflow_executions
       SET status = 'waiting', lease_expires = NULL, updated_at = now()
     WHERE id IN (SELECT id FROM fence) AND EXISTS (SELECT 1 FROM live)
)
SELECT EXISTS (SELECT 1 FROM fence), EXISTS (SELECT 1 FROM live)
"""


@dataclass(frozen=True)
class ChildHandle:
    """A started child: its execution id and workflow name (JSON-serializable via ``to_json``)."""

    execution_id: int
    workflow_name: str
    step_id: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, value: ChildHandle | dict[str, Any]) -> ChildHandle:
        """A handle from a handle or its ``to_json()`` form (e.g. returned by a step)."""
        if isinstance(value, ChildHandle):
            return value
        if isinstance(value, dict) and {"execution_id", "workflow_name", "step_id"} <= value.keys():
            return cls(int(value["execution_id"]), value["workflow_name"], value["step_id"])
        raise TypeError(f"expected a handle returned by ctx.start_child, got {value!r}")


@dataclass(frozen=True)
class ChildState:
    id: int
    workflow_name: str
    status: str
    output: Any
    error: str | None

    @property
    def done(self) -> bool:
        return self.status not in LIVE_STATUSES

    def outcome(self) -> dict[str, Any]:
        return {
            "child_id": self.id,
            "workflow": self.workflow_name,
            "status": self.status,
            "output": self.output,
            "error": self.error,
        }


def start(
    conn: psycopg.Connection,
    schema: str,
    at: Fence,
    *,
    name: str,
    input: Jsonb,
    options: EnqueueOptions,
    version: str | None = None,
) -> int | None:
    """Insert the child and the parent's checkpoint; the child's id, None if the claim is lost.

    ``options.queue``/``priority`` None: as for an enqueue (the bound queue, the queue's
    priority); ``version`` None: any worker with the child workflow may run it."""
    row = conn.execute(
        render(START_CHILD, schema),
        at.params(
            name=name,
            input=input,
            key=keys.child_key(at.execution_id, at.step_id),
            run_at=options.start_at(),
            priority=options.priority,
            channel=notify_channel(schema),
            queue=options.queue,
            ckey=options.concurrency_key,
            version=version,
            # Tracing on: the child's runs continue the trace of the parent's run that started it.
            trace=tracing.enqueued(name, 1) if tracing.state.on else None,
        ),
    ).fetchone()
    row = one_row(row, "START_CHILD")
    return row[1] if row[0] else None


def states(conn: psycopg.Connection, schema: str, execution_id: int) -> dict[int, ChildState]:
    """Every child of the execution by id."""
    rows = conn.execute(render(CHILDREN, schema), {"eid": execution_id}).fetchall()
    return {row[0]: ChildState(*row) for row in rows}


def park(
    conn: psycopg.Connection, schema: str, at: Fence, *, children: list[int], after: timedelta | None
) -> tuple[bool, bool]:
    """Park on ``children``: (claim still ours, parked). Not parked: they all finished."""
    row = conn.execute(
        render(PARK_ON_CHILDREN, schema),
        at.params(ids=children, details=Jsonb({"children": children}), after=after),
    ).fetchone()
    row = one_row(row, "PARK_ON_CHILDREN")
    return bool(row[0]), bool(row[1])
