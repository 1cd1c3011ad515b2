"""Leases: one UPDATE renews every lease a worker holds; workers announce and retire themselves."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from datetime import timedelta

import psycopg

from kestrel_core.db.statements import notify_channel, render

# Renew the leases of the executions this worker is running and say which (id, epoch) it
# still holds: a row that is missing was swept, cancelled or reclaimed, and its thread must
# stop at the next boundary. Only ids in flight are renewed: an execution the worker gave up
# on (its database write failed) lets its lease lapse and is retried elsewhere.
HEARTBEAT = """
WITH mine AS (
    -- Locked in id order, the order the worker's batched step boundaries lock them in
    -- (boundary.py): two statements locking the same rows in different orders can deadlock.
    SELECT id FROM {schema}.workflow_executions
     WHERE status = 'running' AND owner_id = %(owner)s AND id = ANY(%(ids)s)
     ORDER BY id
       FOR NO KEY UPDATE
), renewed AS (
    UPDATE {schema}.workflow_executions e SET lease_expires = now() + %(lease)s
      FROM {async_commit}, mine
     WHERE e.id = mine.id
    RETURNING e.id, e.claim_epoch
), beat AS (
    UPDATE {schema}.workers SET last_heartbeat = now(), stopped_at = NULL
     WHERE worker_id = %(owner)s
)
SELECT id, claim_epoch FROM renewed
"""

REGISTER = """
INSERT INTO {schema}.workers (worker_id, hostname, pid, workflows, concurrency, versions, queues)
VALUES (%(owner)s, %(hostname)s, %(pid)s, %(workflows)s, %(concurrency)s, %(versions)s, %(queues)s)
ON CONFLICT (worker_id) DO UPDATE
   SET hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, workflows = EXCLUDED.workflows,
       concurrency = EXCLUDED.concurrency, started_at = now(), last_heartbeat = now(),
       stopped_at = NULL, versions = EXCLUDED.versions, queues = EXCLUDED.queues
"""

# On shutdown: hand back what did not finish so another worker picks it up at once.
RELEASE = """
WITH released AS (
    UPDATE {schema}.workflow_executions
       SET status = 'enqueued', lease_expires = NULL, run_at = now(), updated_at = now()
     WHERE status = 'running' AND owner_id = %(owner)s
    RETURNING id, workflow_name
), woke AS (
    SELECT pg_notify(%(channel)s, name) FROM (SELECT DISTINCT workflow_name AS name FROM released) n
)
SELECT id FROM released, (SELECT count(*) FROM woke) w
"""

RETIRE = "UPDATE {schema}.workers SET stopped_at = now() WHERE worker_id = %(owner)s"


def default_worker_id() -> str:
    """host:pid:random, unique per process and readable in the console."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


def heartbeat(
    conn: psycopg.Connection, schema: str, owner: str, lease: timedelta, execution_ids: Sequence[int]
) -> set[tuple[int, int]]:
    """Renew the leases ``owner`` holds on ``execution_ids``; returns the (execution_id, epoch)
    pairs it still holds."""
    rows = conn.execute(
        render(HEARTBEAT, schema), {"owner": owner, "lease": lease, "ids": list(execution_ids)}
    ).fetchall()
    return {(row[0], row[1]) for row in rows}


def register(
    conn: psycopg.Connection,
    schema: str,
    owner: str,
    workflows: Sequence[str],
    concurrency: int,
    versions: Sequence[str | None] | None = None,
    queues: Sequence[str] | None = None,
) -> None:
    """Announce this worker, the workflow names it runs and their versions (parallel lists),
    and the queues it serves (None: all); read by the console."""
    conn.execute(
        render(REGISTER, schema),
        {
            "owner": owner,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "workflows": list(workflows),
            "concurrency": concurrency,
            "versions": [v or "" for v in versions] if versions is not None else [""] * len(workflows),
            "queues": list(queues) if queues is not None else None,
        },
    )


def release_all(conn: psycopg.Connection, schema: str, owner: str) -> list[int]:
    """Re-enqueue every execution ``owner`` still runs; returns their ids."""
    rows = conn.execute(render(RELEASE, schema), {"owner": owner, "channel": notify_channel(schema)})
    return [row[0] for row in rows]


def retire(conn: psycopg.Connection, schema: str, owner: str) -> None:
    """Mark this worker stopped."""
    conn.execute(render(RETIRE, schema), {"owner": owner})
