"""Reading one execution back: what ``Kestrel.get`` returns."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kestrel_core.base.errors import NotFound
from kestrel_core.base.statuses import TERMINAL_STATUSES
from kestrel_core.db.sql_files import statements_beside

SQL = statements_beside(__file__)


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


def found(row: Execution | None, execution_id: int) -> Execution:
    """The execution GET read, or NotFound."""
    if row is None:
        raise NotFound(f"no execution with id {execution_id}")
    return row
