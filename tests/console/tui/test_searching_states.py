"""Never "0 rows" while a query runs or after it timed out (issue 46, finding 4): the list says
"searching…" while a new filter's first read runs, "timed out, narrow the filter" once it was
cancelled (beside the banner's "showing the last data read"), and its count once read."""

from __future__ import annotations

import re

import psycopg
import pytest

from kestrel_console.tui.screens.executions import ExecutionsScreen
from tests.seed import seed_history

from .helpers import console, open_screen, text_of, wait_for


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_a_search_that_runs_or_times_out_never_says_zero_rows(dsn, db, size):
    facts = seed_history(db)
    errors = len(facts.with_status("error"))
    tui = console(dsn, refresh=5.0)  # a 4 s statement timeout: "searching…" is seen first
    async with tui.run_test(size=size) as pilot:
        screen = await open_screen(pilot, "2", ExecutionsScreen)
        line = screen.query_one("#exec-where")
        seen: list[str] = []

        def says(text: str) -> bool:
            now = text_of(line)
            seen.append(now)
            return text in now

        with psycopg.connect(dsn, autocommit=False) as blocker:
            blocker.execute("LOCK TABLE kestrel.workflow_executions IN ACCESS EXCLUSIVE MODE")
            await pilot.press("slash", *"status:error", "enter")
            await wait_for(pilot, lambda: says("searching…"), what="searching…")
            await wait_for(pilot, lambda: says("timed out, narrow the filter"), timeout=15, what="timed out")
            assert tui.db_problem is not None and "showing the last data read" in tui.db_problem[1]
            blocker.rollback()
        await wait_for(pilot, lambda: says(f"({errors} rows"), timeout=15, what="the rows")
        assert not any(re.search(r"\b0 rows", s) for s in seen), seen


async def test_more_than_a_page_matching_says_how_many_as_estimated(dsn, db):
    # Issue 46: estimates instead of counts where a count would scan. 450 match, a page is 100.
    db.execute(
        "INSERT INTO workflow_executions (workflow_name, status) "
        "SELECT CASE WHEN g % 3 = 0 THEN 'other' ELSE 'estimated' END, 'success' FROM generate_series(1, 675) AS g"
    )
    db.execute("ANALYZE workflow_executions")
    async with console(dsn).run_test(size=(200, 50)) as pilot:
        screen = await open_screen(pilot, "2", ExecutionsScreen)
        await pilot.press("slash")
        screen.query_one("#exec-filter").value = "workflow:estimated"
        await pilot.press("enter")
        where = screen.query_one("#exec-where")
        await wait_for(pilot, lambda: "matching (the planner's estimate)" in text_of(where), what="the estimate")
        shown = text_of(where)
        estimate = int(shown.split("≈")[1].split(" ")[0].replace(",", ""))
        assert "100 rows of ≈" in shown and 300 <= estimate <= 700, shown
