"""What the dashboard and the result tables must not hide (issue 46, finding 8): a paused queue,
the rows and columns a table cuts ("↓ more rows", "→ more columns"), one number format
(123,456) everywhere, and how long an execution has been enqueued counted from when it was last
enqueued, not from when it was created."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from kestrel_console.read import Reader
from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.reports import ReportsScreen
from kestrel_console.tui.widgets.cut_table import MORE_COLUMNS, MORE_ROWS
from kestrel_core import Kestrel
from kestrel_core.dispatch.queues import declare
from tests.seed import seed_bulk_finished, seed_history

from .helpers import console, fresh, screen_lines, text_of, wait_for

SIZES = [(80, 24), (200, 50)]

MANY_WORKFLOWS = """
INSERT INTO workflow_executions (workflow_name, status, input)
SELECT 'flow-' || lpad(i::text, 2, '0'), 'waiting', '{}' FROM generate_series(1, 40) AS i
"""

OLD_FAILURE = """
INSERT INTO workflow_executions (workflow_name, status, input, error, created_at, updated_at, finished_at)
VALUES ('nobody-runs-me', 'error', '{}', 'boom', now() - interval '23 days', now() - interval '23 days',
        now() - interval '23 days')
RETURNING id
"""


def whole_screen(pilot) -> str:
    return "\n".join(screen_lines(pilot.app))


@pytest.mark.parametrize("size", SIZES)
async def test_the_dashboard_names_paused_queues_and_cut_rows(dsn, db, size):
    seed_history(db)
    with Kestrel(dsn) as app:
        app.queue("emails", concurrency=3)
        app.workflow("send", queue="emails")(lambda ctx, _: None)
        with app.connection() as conn:
            declare(conn, app.schema, list(app.queues.values()), {"emails": ["send"]})
        app.enqueue_many("send", [1, 2, 3, 4])
        app.pause_queue("emails", by="alice")
    db.execute(MANY_WORKFLOWS)
    tui = console(dsn)
    async with tui.run_test(size=size) as pilot:
        dashboard = await fresh(pilot)
        assert isinstance(dashboard, DashboardScreen)
        said = text_of(dashboard.query_one("#dash-unserved"))
        assert "⏸ queue 'emails' paused by alice" in said and "4 enqueued held" in said, said
        depth = dashboard.query_one("#dash-depth")
        await wait_for(pilot, lambda: MORE_ROWS in str(depth.border_subtitle), what="the more-rows sign")
        await wait_for(pilot, lambda: MORE_ROWS in whole_screen(pilot), what="the sign on the screen")


@pytest.mark.parametrize("size", SIZES)
async def test_one_number_format_and_enqueued_since_the_last_enqueue(dsn, db, size):
    seed_bulk_finished(db, 12_340, spread=timedelta(minutes=50), analyze=False)  # every 10th errored
    eid = db.execute(OLD_FAILURE).fetchone()[0]
    with Kestrel(dsn) as app:
        app.requeue(eid, by="alice")
    tui = console(dsn)
    async with tui.run_test(size=size) as pilot:
        dashboard = await fresh(pilot)
        assert "errors in the last hour 1,234" in text_of(dashboard.query_one("#dash-errors"))
        assert dashboard.query_one("#dash-depth").shown("bulk", "success") == "11,106"
        totals = [text_of(dashboard.query_one(f"#spark-total-{k}")) for k in ("completed", "failed")]
        assert all(re.fullmatch(r"\s*[\d,]+ · [\d,]+ now", t) for t in totals), totals
        assert not any(re.search(r"\d{4}", t) for t in totals), totals  # 1,234, never 1234
        unserved = text_of(dashboard.query_one("#dash-unserved"))
        line = next(x for x in unserved.splitlines() if "nobody-runs-me" in x)
        assert "(since last enqueued)" in line
        assert not re.search(r"for \d+d", line), line  # created 23 days ago, re-enqueued just now


@pytest.mark.parametrize("size", SIZES)
async def test_result_and_attempt_tables_say_more_columns_when_cut(dsn, db, size):
    facts = seed_history(db)
    narrow = size[0] < 120
    tui = console(dsn)
    async with tui.run_test(size=size) as pilot:
        await pilot.press("5")
        await wait_for(pilot, lambda: isinstance(tui.screen, ReportsScreen))
        screen = tui.screen
        await tui.open_report("operator-actions")
        table = screen.query_one("#rep-results")
        await wait_for(pilot, lambda: table.row_count > 0, what="the report's rows")
        if narrow:  # laid out with its rows: wider than the screen (right after the rows came, still 0)
            await wait_for(pilot, lambda: table.max_scroll_x > 0, what="the report's table laid out")
        await wait_for(pilot, lambda: (MORE_COLUMNS in str(table.border_subtitle)) == (table.max_scroll_x > 0))
        if narrow:
            await wait_for(pilot, lambda: MORE_COLUMNS in whole_screen(pilot), what="the sign on the screen")

        tui.push_screen(DetailScreen(facts.id("failed_last_hour")))
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen))
        detail = tui.screen
        await fresh(pilot, detail)
        attempts = detail.query_one("#detail-attempts")
        if narrow:
            await wait_for(pilot, lambda: attempts.max_scroll_x > 0, what="the attempts table laid out")
        await wait_for(pilot, lambda: (MORE_COLUMNS in str(attempts.border_subtitle)) == (attempts.max_scroll_x > 0))
        if narrow:
            await wait_for(pilot, lambda: MORE_COLUMNS in whole_screen(pilot), what="the sign on the screen")


def test_the_dashboard_reads_paused_queues_in_its_snapshot(dsn):
    with Kestrel(dsn) as app:
        app.queue("bulk", per_worker=2)
        with app.connection() as conn:
            declare(conn, app.schema, list(app.queues.values()), {})
        app.pause_queue("bulk", by="bob")
    with Reader(dsn) as reader:
        paused = reader.dashboard()["paused_queues"]
    assert [(q["name"], q["paused_by"], q["enqueued"]) for q in paused] == [("bulk", "bob", 0)]
