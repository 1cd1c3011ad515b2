"""Enqueue: insert ``enqueued`` rows and wake idle workers with NOTIFY."""

from __future__ import annotations

from datetime import datetime
from collections.abc import Mapping
from typing import Any, Sequence

import psycopg

from .errors import InvalidArgument
from .keys import check_idempotency_key
from .serialization import to_json
from .statements import notify_channel, render

# The queue of a new execution: the one given, else the one its workflow is bound to in the
# code of the workers (queues.workflows), else the default; its priority defaults to the queue's.
# A keyed execution marks its queue keyed (claimed under the queue's lock, see claim.py) in
# the same statement; the check first keeps the common case from touching the queue's row.
_PLACE = """
WITH target AS (
    SELECT coalesce(%(queue)s::text,
                    (SELECT q.name FROM {schema}.queues q WHERE %(name)s::text = ANY(q.workflows)
                      ORDER BY q.declared_at DESC NULLS LAST, q.name LIMIT 1),
                    'default') AS queue
), placed AS (
    SELECT t.queue, coalesce(%(priority)s::int, q.priority, 0) AS priority
      FROM target t LEFT JOIN {schema}.queues q ON q.name = t.queue
), keyed AS (
    INSERT INTO {schema}.queues AS q (name, keyed)
    SELECT p.queue, true FROM placed p
     WHERE %(ckey)s::text IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM {schema}.queues k WHERE k.name = p.queue AND k.keyed)
    ON CONFLICT (name) DO UPDATE SET keyed = true
)"""

def placement(workflows: Mapping[str, Any], name: str, queue: str | None,
              concurrency_key: str | None) -> dict[str, Any]:
    """Queue and version for a new execution of ``name``: from this process's code when it
    registers the workflow; else NULL, resolved in the database (the workflow's bound queue)
    or left open (any version)."""
    wf = workflows.get(name)
    return {"queue": queue or (wf.queue if wf else None), "concurrency_key": concurrency_key,
            "version": wf.version if wf else None}


# One round trip: insert (or find the row holding the idempotency key) and notify.
ENQUEUE = _PLACE + """, ins AS (
    INSERT INTO {schema}.workflow_executions
           (workflow_name, input, idempotency_key, run_at, priority, queue, concurrency_key, version)
    SELECT %(name)s, %(input)s, %(key)s, coalesce(%(run_at)s, now()), p.priority, p.queue,
           %(ckey)s, %(version)s
      FROM placed p
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

ENQUEUE_MANY = _PLACE + """, ins AS (
    INSERT INTO {schema}.workflow_executions
           (workflow_name, input, run_at, priority, queue, concurrency_key, version)
    SELECT %(name)s, t.input, coalesce(%(run_at)s, now()), p.priority, p.queue, %(ckey)s, %(version)s
      FROM unnest(%(inputs)s::jsonb[]) WITH ORDINALITY AS t(input, n), placed p
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


def check_priority(priority: object) -> int | None:
    """``priority`` if it fits the column (a 32-bit integer) or is None (the queue's default),
    else InvalidArgument."""
    if priority is None:
        return None
    low, high = PRIORITY_RANGE
    if not isinstance(priority, int) or isinstance(priority, bool) or not low <= priority <= high:
        raise InvalidArgument(f"priority must be an integer from {low} to {high}, not {priority!r}")
    return priority


def enqueue(
    conn: psycopg.Connection, schema: str, name: str, input: Any = None, *,
    idempotency_key: str | None = None, run_at: datetime | None = None, priority: int | None = None,
    queue: str | None = None, concurrency_key: str | None = None, version: str | None = None,
) -> int:
    """Insert one execution and return its id (the existing id for a repeated key).

    ``queue`` None: the workflow's bound queue; ``priority`` None: the queue's; ``version``
    None: any worker that has the workflow may run it.
    """
    check_workflow_name(name)
    check_priority(priority)
    check_idempotency_key(idempotency_key)
    params = {
        "queue": queue, "ckey": concurrency_key, "version": version,
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
    run_at: datetime | None = None, priority: int | None = None, queue: str | None = None,
    concurrency_key: str | None = None, version: str | None = None,
) -> list[int]:
    """Insert one execution per input in a single round trip; ids in input order."""
    check_workflow_name(name)
    check_priority(priority)
    values = [to_json(v, f"input #{i} of workflow {name!r}") for i, v in enumerate(inputs)]
    if not values:
        return []
    params = {
        "name": name, "inputs": values, "run_at": run_at, "priority": priority,
        "channel": notify_channel(schema), "queue": queue, "ckey": concurrency_key, "version": version,
    }
    return [row[0] for row in conn.execute(render(ENQUEUE_MANY, schema), params)]
