"""Operator actions: approve, reject, cancel, requeue, fork, pause, resume.

Each is one call to a SECURITY DEFINER function of the schema (migration 0002), which checks
the allowed states, writes the audit row and applies the change in one transaction. A refusal
changes nothing and surfaces as NotFound or ActionRefused.
"""

from __future__ import annotations

from typing import Any

import psycopg

from kestrel_core.base.errors import InvalidArgument, from_database
from kestrel_core.base.serialization import to_json
from kestrel_core.db.statements import render

DECIDE = "SELECT {schema}.decide_approval(%s, %s, %s, %s, %s)"
CANCEL = "SELECT {schema}.cancel_execution(%s, %s, %s)"
REQUEUE = "SELECT {schema}.requeue_execution(%s, %s, %s)"
FORK = "SELECT {schema}.fork_execution(%s, %s, %s, %s, %s, %s, %s)"
PAUSE = "SELECT {schema}.pause_execution(%s, %s, %s)"
RESUME = "SELECT {schema}.resume_execution(%s, %s, %s)"


class _Unset:
    """The type of ``UNSET``: a fork without new input (None is the JSON value null)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


BIGINT_MAX = 2**63 - 1


def check_execution_id(execution_id: object) -> int:
    """``execution_id`` if it can be an execution id (a positive 64-bit integer), else
    InvalidArgument: an id past bigint would reach Postgres as numeric and match no function."""
    if not isinstance(execution_id, int) or isinstance(execution_id, bool) or not 1 <= execution_id <= BIGINT_MAX:
        raise InvalidArgument(f"no execution can have id {execution_id!r}: ids are integers from 1 to {BIGINT_MAX}")
    return execution_id


def _call(conn: psycopg.Connection, schema: str, statement: str, params: tuple[Any, ...]) -> Any:
    check_execution_id(params[0])
    for attempt in range(3):
        try:
            row = conn.execute(render(statement, schema), params).fetchone()
            break
        except psycopg.errors.DeadlockDetected:
            # A cancel cascading to children can meet a child finishing at that instant (which
            # locks in the other order); Postgres aborts one side, changing nothing: try again.
            if attempt == 2:
                raise
        except psycopg.Error as exc:
            raise from_database(exc) from None
    return row[0] if row else None


async def _call_async(conn: psycopg.AsyncConnection, schema: str, statement: str, params: tuple[Any, ...]) -> Any:
    """``_call`` on an AsyncConnection: the same statements, checks and retries."""
    check_execution_id(params[0])
    for attempt in range(3):
        try:
            cur = await conn.execute(render(statement, schema), params)
            row = await cur.fetchone()
            break
        except psycopg.errors.DeadlockDetected:
            if attempt == 2:
                raise
        except psycopg.Error as exc:
            raise from_database(exc) from None
    return row[0] if row else None


def decide(
    conn: psycopg.Connection,
    schema: str,
    execution_id: int,
    step_id: str,
    *,
    approved: bool,
    by: str,
    comment: str | None = None,
) -> dict[str, Any]:
    """Record an approval decision and re-enqueue the execution; returns the decision."""
    decision: dict[str, Any] = _call(conn, schema, DECIDE, (execution_id, step_id, approved, by, comment))
    return decision


def cancel(conn: psycopg.Connection, schema: str, execution_id: int, *, by: str, comment: str | None = None) -> str:
    """Cancel an enqueued, running or waiting execution; returns the status it had."""
    status: str = _call(conn, schema, CANCEL, (execution_id, by, comment))
    return status


def requeue(conn: psycopg.Connection, schema: str, execution_id: int, *, by: str, comment: str | None = None) -> str:
    """Re-enqueue an errored or cancelled execution, or one whose lease expired."""
    status: str = _call(conn, schema, REQUEUE, (execution_id, by, comment))
    return status


def pause(conn: psycopg.Connection, schema: str, execution_id: int, *, by: str, comment: str | None = None) -> str:
    """Hold an enqueued, running or waiting execution (a running one stops at its next step
    boundary, fenced like a cancel); returns the status it had."""
    status: str = _call(conn, schema, PAUSE, (execution_id, by, comment))
    return status


def resume(conn: psycopg.Connection, schema: str, execution_id: int, *, by: str, comment: str | None = None) -> str:
    """Let a paused execution go on; returns the status it went to: 'waiting' while one of its
    waits is still open, 'running' when the claim it was paused under still runs it (a step in
    flight: that claim goes on), else 'enqueued'."""
    status: str = _call(conn, schema, RESUME, (execution_id, by, comment))
    return status


async def decide_async(
    conn: psycopg.AsyncConnection,
    schema: str,
    execution_id: int,
    step_id: str,
    *,
    approved: bool,
    by: str,
    comment: str | None = None,
) -> dict[str, Any]:
    """``decide`` on an AsyncConnection."""
    decision: dict[str, Any] = await _call_async(conn, schema, DECIDE, (execution_id, step_id, approved, by, comment))
    return decision


async def cancel_async(
    conn: psycopg.AsyncConnection, schema: str, execution_id: int, *, by: str, comment: str | None = None
) -> str:
    """``cancel`` on an AsyncConnection."""
    status: str = await _call_async(conn, schema, CANCEL, (execution_id, by, comment))
    return status


async def requeue_async(
    conn: psycopg.AsyncConnection, schema: str, execution_id: int, *, by: str, comment: str | None = None
) -> str:
    """``requeue`` on an AsyncConnection."""
    status: str = await _call_async(conn, schema, REQUEUE, (execution_id, by, comment))
    return status


async def pause_async(
    conn: psycopg.AsyncConnection, schema: str, execution_id: int, *, by: str, comment: str | None = None
) -> str:
    """``pause`` on an AsyncConnection."""
    status: str = await _call_async(conn, schema, PAUSE, (execution_id, by, comment))
    return status


async def resume_async(
    conn: psycopg.AsyncConnection, schema: str, execution_id: int, *, by: str, comment: str | None = None
) -> str:
    """``resume`` on an AsyncConnection."""
    status: str = await _call_async(conn, schema, RESUME, (execution_id, by, comment))
    return status


def _fork_params(
    execution_id: int, from_step: str, input: Any, version: str | None, by: str, comment: str | None
) -> tuple[Any, ...]:
    if not isinstance(from_step, str) or not from_step:
        raise InvalidArgument("fork needs the id of the step to run again from (from_step)")
    given = input is not UNSET
    payload = to_json(input, f"the input of the fork of execution {execution_id}") if given else None
    return (execution_id, from_step, payload, given, version, by, comment)


def fork(
    conn: psycopg.Connection,
    schema: str,
    execution_id: int,
    *,
    from_step: str,
    input: Any = UNSET,
    version: str | None = None,
    by: str,
    comment: str | None = None,
) -> int:
    """Start a new execution from ``from_step`` of a finished or waiting one (its checkpoints
    before that step kept, the step and all after it run again); returns the new id."""
    new_id: int = _call(conn, schema, FORK, _fork_params(execution_id, from_step, input, version, by, comment))
    return new_id


async def fork_async(
    conn: psycopg.AsyncConnection,
    schema: str,
    execution_id: int,
    *,
    from_step: str,
    input: Any = UNSET,
    version: str | None = None,
    by: str,
    comment: str | None = None,
) -> int:
    """``fork`` on an AsyncConnection."""
    params = _fork_params(execution_id, from_step, input, version, by, comment)
    new_id: int = await _call_async(conn, schema, FORK, params)
    return new_id
