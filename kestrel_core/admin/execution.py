"""Reading one execution back: what ``Kestrel.get`` returns."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row

from kestrel_core.base.errors import NotFound
from kestrel_core.base.statuses import TERMINAL_STATUSES
from kestrel_core.db.statements import render


@dataclass(frozen=True)
class Execution:
    id: int
    workflow_name: str
    status: str
    input: Any
    output: Any
    error: str | None
    owner_id: str | None
    lease_expires: datetime | None
    claims: int
    run_at: datetime
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def done(self) -> bool:
        """True once the execution reached success, error or cancelled."""
        return self.status in TERMINAL_STATUSES


GET = """
SELECT id, workflow_name, status, input, output, error, owner_id, lease_expires, claims,
       run_at, created_at, updated_at, started_at, finished_at
  FROM {schema}.workflow_executions WHERE id = %s
"""


def get(conn: psycopg.Connection, schema: str, execution_id: int) -> Execution:
    """The execution with this id, or NotFound."""
    with conn.cursor(row_factory=class_row(Execution)) as cur:
        row = cur.execute(render(GET, schema), (execution_id,)).fetchone()
    if row is None:
        raise NotFound(f"no execution with id {execution_id}")
    return row


async def get_async(conn: psycopg.AsyncConnection, schema: str, execution_id: int) -> Execution:
    """``get`` on an AsyncConnection: the same statement."""
    async with conn.cursor(row_factory=class_row(Execution)) as cur:
        await cur.execute(render(GET, schema), (execution_id,))
        row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no execution with id {execution_id}")
    return row
