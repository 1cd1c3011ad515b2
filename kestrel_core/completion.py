"""Completing an execution (success or error), fenced by the claim."""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from .statements import render

COMPLETE = """
UPDATE {schema}.workflow_executions
   SET status = %(status)s, output = %(output)s, error = %(error)s, lease_expires = NULL,
       finished_at = now(), updated_at = now()
 WHERE {claim_is_current}
"""

# After a lost reply: did our own completion commit?
CHECK = """
SELECT status FROM {schema}.workflow_executions
 WHERE id = %(eid)s AND owner_id = %(owner)s AND claim_epoch = %(epoch)s
"""


def complete(
    conn: psycopg.Connection, schema: str, *, execution_id: int, owner: str, epoch: int,
    status: str, output: Jsonb | None = None, error: str | None = None,
) -> bool:
    """Finish the execution; False when the claim is no longer ours (nothing written).

    When no row matched, our own earlier attempt of this call may have committed before its
    connection broke (the worker retries): finding our claim with this final status is success.
    """
    params = {"eid": execution_id, "owner": owner, "epoch": epoch, "status": status,
              "output": output, "error": error}
    cur = conn.execute(render(COMPLETE, schema), params)
    if cur.rowcount == 1:
        return True
    row = conn.execute(render(CHECK, schema), params).fetchone()
    return bool(row and row[0] == status)
