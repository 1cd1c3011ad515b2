"""Column widths follow the data both ways (issue 46, finding 5): a column widened by a long
value narrows again once that row has left, on Executions and Approvals; at 80x24 Approvals
keeps its waiting, since and deadline columns in sight beside a long workflow name and gate id."""

from __future__ import annotations

import pytest
from textual.widgets.data_table import ColumnKey

from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from tests.seed import seed_history

from .helpers import fresh, on_screen, screen_lines

LONG_WORKFLOW = "nightly-reconcile-every-ledger-of-every-region-" + "x" * 30
LONG_GATE = "approve-the-rollback-of-the-primary-database-" + "y" * 20

PENDING_GATE = """
WITH e AS (
    INSERT INTO workflow_executions (workflow_name, status, input) VALUES (%s, 'waiting', '{}') RETURNING id
)
INSERT INTO workflow_waits (execution_id, step_id, kind, wake_at, details)
SELECT id, %s, 'approval', now() + interval '2 days', '{"risk": "high"}' FROM e
RETURNING execution_id
"""


def width(table, column: str) -> int:
    return table.columns[ColumnKey(column)].content_width


def header_row(pilot) -> str:
    return next(line for line in screen_lines(pilot.app) if "execution" in line and "gate" in line)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_approvals_columns_narrow_again_and_stay_in_sight(dsn, db, size):
    seed_history(db)
    eid = db.execute(PENDING_GATE, (LONG_WORKFLOW, LONG_GATE)).fetchone()[0]
    async with on_screen(dsn, "3", ApprovalsScreen, size=size) as (tui, pilot, screen):
        await pilot.pause()
        header = header_row(pilot)
        for label in ("waiting", "since", "deadline"):
            assert label in header, f"{label!r} pushed off the screen at {size}: {header!r}"
        wide = width(screen.table, "workflow")
        if size[0] >= 120:
            assert wide == len(LONG_WORKFLOW)  # all of it where there is room

        # The long gate is decided elsewhere: its row leaves, the columns narrow to what is left.
        db.execute(
            "UPDATE workflow_waits SET resolved_at = now(), decision = 'approved' WHERE execution_id = %s", (eid,)
        )
        await fresh(pilot, screen)
        await pilot.pause()
        names = [screen.table.rows_data[k]["workflow_name"] for k in screen.table.keys()]
        assert width(screen.table, "workflow") == max(len(n) for n in [*names, "workflow"]) < wide
        gates = [screen.table.rows_data[k]["step_id"] for k in screen.table.keys()]
        assert width(screen.table, "step") == max(len(g) for g in [*gates, "gate"])


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_executions_columns_narrow_again(dsn, db, size):
    seed_history(db)
    db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, input) VALUES (%s, 'enqueued', '{}')", (LONG_WORKFLOW,)
    )
    async with on_screen(dsn, "2", ExecutionsScreen, size=size) as (tui, pilot, screen):
        wide = width(screen.table, "workflow")
        assert wide > len("remediate")
        header = next(line for line in screen_lines(tui) if " id " in f" {line} " and "status" in line)
        for label in ("status", "age", "duration"):
            assert label in header, f"{label!r} pushed off the screen at {size}: {header!r}"
        db.execute("DELETE FROM workflow_executions WHERE workflow_name = %s", (LONG_WORKFLOW,))
        await fresh(pilot, screen)
        names = [screen.table.rows_data[k]["workflow_name"] for k in screen.table.keys()]
        assert width(screen.table, "workflow") == max(len(n) for n in [*names, "workflow"]) < wide
