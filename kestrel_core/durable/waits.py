"""Parking an execution on a durable sleep or an approval gate.

One fenced statement writes the ``workflow_waits`` row and flips the execution to ``waiting``
(releasing its lease). Nothing waits in memory: the sweeper or a decision re-enqueues it, and
the replay finds the wait's checkpoint.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
from psycopg.types.json import Jsonb

from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import render
from kestrel_core.durable.checkpoint import Fence

SQL = statements_beside(__file__)


def park(
    conn: psycopg.Connection,
    schema: str,
    at: Fence,
    *,
    kind: str,
    after: timedelta | None,
    details: Jsonb | None = None,
) -> bool:
    """Create the wait and set the execution ``waiting``; False when the claim is no longer ours."""
    row = conn.execute(render(SQL.park, schema), at.params(kind=kind, after=after, details=details)).fetchone()
    return bool(row and row[0])
