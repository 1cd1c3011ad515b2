"""Enqueue: insert ``enqueued`` rows and wake idle workers with NOTIFY."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

import psycopg

from .errors import InvalidArgument
from .serialization import to_json
from .statements import notify_channel, render

# One round trip: insert (or find the row holding the idempotency key) and notify.
ENQUEUE = """
WITH ins AS (
    INSERT INTO {schema}.workflow_executions (workflow_name, input, idempotency_key, run_at, priority)
    VALUES (%(name)s, %(input)s, %(key)s, coalesce(%(run_at)s, now()), %(priority)s)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id
)
SELECT id, pg_notify(%(channel)s, %(name)s)::text FROM ins
UNION ALL
SELECT id, NULL FROM {schema}.workflow_executions
 WHERE idempotency_key = %(key)s AND NOT EXISTS (SELECT 1 FROM ins)
"""

# A concurrent enqueue with the same key committed after our snapshot: read it now.
BY_KEY = "SELECT id FROM {schema}.workflow_executions WHERE idempotency_key = %s"

ENQUEUE_MANY = """
WITH ins AS (
    INSERT INTO {schema}.workflow_executions (workflow_name, input, run_at, priority)
    SELECT %(name)s, t.input, coalesce(%(run_at)s, now()), %(priority)s
      FROM unnest(%(inputs)s::jsonb[]) WITH ORDINALITY AS t(input, n)
     ORDER BY t.n
    RETURNING id
), woke AS (
    SELECT pg_notify(%(channel)s, %(name)s) WHERE EXISTS (SELECT 1 FROM ins)
)
SELECT id FROM ins, (SELECT count(*) FROM woke) AS w ORDER BY id
"""


# A workflow name is NOTIFY's payload (at most 8000 bytes) and is shown in every list: bounded.
MAX_NAME_LENGTH = 200
PRIORITY_RANGE = (-(2**31), 2**31 - 1)  # the column is an integer


def check_workflow_name(name: object) -> str:
    """``name`` if it can name a workflow: a non-empty string of at most MAX_NAME_LENGTH
    characters, no NUL; else InvalidArgument (a ValueError)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument(f"a workflow name must be a non-empty string, not {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidArgument(f"workflow name too long ({len(name)} characters; the limit is {MAX_NAME_LENGTH})")
    if "\x00" in name:
        raise InvalidArgument("a workflow name cannot contain a NUL character")
    return name


def check_priority(priority: object) -> int:
    """``priority`` if it fits the column (a 32-bit integer), else InvalidArgument."""
    low, high = PRIORITY_RANGE
    if not isinstance(priority, int) or isinstance(priority, bool) or not low <= priority <= high:
        raise InvalidArgument(f"priority must be an integer from {low} to {high}, not {priority!r}")
    return priority


def enqueue(
    conn: psycopg.Connection, schema: str, name: str, input: Any = None, *,
    idempotency_key: str | None = None, run_at: datetime | None = None, priority: int = 0,
) -> int:
    """Insert one execution and return its id (the existing id for a repeated key)."""
    check_workflow_name(name)
    check_priority(priority)
    params = {
        "name": name,
        "input": to_json(input, f"the input of workflow {name!r}"),
        "key": idempotency_key,
        "run_at": run_at,
        "priority": priority,
        "channel": notify_channel(schema),
    }
    row = conn.execute(render(ENQUEUE, schema), params).fetchone()
    if row is None:
        row = conn.execute(render(BY_KEY, schema), (idempotency_key,)).fetchone()
    assert row is not None, "an insert or an existing key always yields a row"
    return row[0]


def enqueue_many(
    conn: psycopg.Connection, schema: str, name: str, inputs: Sequence[Any], *,
    run_at: datetime | None = None, priority: int = 0,
) -> list[int]:
    """Insert one execution per input in a single round trip; ids in input order."""
    check_workflow_name(name)
    check_priority(priority)
    values = [to_json(v, f"input #{i} of workflow {name!r}") for i, v in enumerate(inputs)]
    if not values:
        return []
    params = {
        "name": name, "inputs": values, "run_at": run_at, "priority": priority,
        "channel": notify_channel(schema),
    }
    return [row[0] for row in conn.execute(render(ENQUEUE_MANY, schema), params)]
