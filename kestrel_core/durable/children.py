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
from kestrel_core.db.sql_files import paste, statements_beside
from kestrel_core.db.statements import notify_channel, one_row, render
from kestrel_core.dispatch import keys
from kestrel_core.dispatch.enqueue import PLACE_ONE, EnqueueOptions
from kestrel_core.durable.checkpoint import Fence

SQL = statements_beside(__file__)

START_CHILD = paste(SQL.start_child, place_one=PLACE_ONE)


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
    rows = conn.execute(render(SQL.children, schema), {"eid": execution_id}).fetchall()
    return {row[0]: ChildState(*row) for row in rows}


def park(
    conn: psycopg.Connection, schema: str, at: Fence, *, children: list[int], after: timedelta | None
) -> tuple[bool, bool]:
    """Park on ``children``: (claim still ours, parked). Not parked: they all finished."""
    row = conn.execute(
        render(SQL.park_on_children, schema),
        at.params(ids=children, details=Jsonb({"children": children}), after=after),
    ).fetchone()
    row = one_row(row, "park_on_children")
    return bool(row[0]), bool(row[1])
