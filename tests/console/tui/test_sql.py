"""The SQL screen: results with row count and time, refusals and errors inline, history, and
a UI that keeps answering keys while a slow query runs."""

from __future__ import annotations

import time

from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.screens.sql import SqlScreen, sql_language
from kestrel_console.tui.widgets.results import ResultsTable
from tests.seed import seed_history

from .helpers import on_screen, rows, wait_for

COUNT = "SELECT count(*) FROM workflow_executions"


async def run(pilot, screen: SqlScreen, query: str, key: str = "ctrl+r") -> str:
    screen.editor.text = query
    screen.editor.focus()
    before = screen.message
    await pilot.press(key)
    await wait_for(
        pilot,
        lambda: screen.message != before and not screen.message.startswith("running"),
        what=f"the result of {query!r}",
    )
    return screen.message


async def test_query_results_refusals_errors_history(dsn, reader_dsn, db):
    seed_history(db)
    async with on_screen(dsn, "4", SqlScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        assert screen.editor.language == sql_language()

        message = await run(
            pilot, screen, "SELECT status, count(*) AS n FROM workflow_executions GROUP BY status ORDER BY status"
        )
        expected = rows(db, "SELECT status, count(*) FROM workflow_executions GROUP BY status ORDER BY status")
        assert message.startswith(f"{len(expected)} rows · ") and " ms · ran the whole editor (1 line, " in message
        table = screen.query_one(ResultsTable)
        assert [c.label.plain for c in table.columns.values()] == ["status", "n"]
        assert [tuple(str(v) for v in table.get_row_at(i)) for i in range(table.row_count)] == [
            (s, str(n)) for s, n in expected
        ]

        before = rows(db, COUNT)
        message = await run(pilot, screen, "DELETE FROM workflow_executions", key="f5")
        assert message.startswith("refused: ") and len(message) > len("refused: ") + 5
        message = await run(pilot, screen, "SELECT pg_terminate_backend(pg_backend_pid())")
        assert message.startswith("refused: ") and "pg_terminate_backend" in message
        assert rows(db, COUNT) == before
        assert table.row_count == 0  # no old result under a refusal

        message = await run(pilot, screen, "SELECT nope FROM workflow_executions")
        assert message.startswith("error") and 'column "nope" does not exist' in message

        # History: newest first; ctrl+up walks back.
        assert screen.history[0] == "SELECT nope FROM workflow_executions"
        assert screen.history[-1].startswith("SELECT status, count(*)")
        await pilot.press("ctrl+up")
        assert screen.editor.text == screen.history[0]
        await pilot.press("ctrl+up")
        assert screen.editor.text == screen.history[1]
        await pilot.press("ctrl+down")
        assert screen.editor.text == screen.history[0]


async def test_keys_are_handled_while_a_slow_query_runs(dsn, reader_dsn, db):
    async with on_screen(dsn, "4", SqlScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        screen.editor.text = "SELECT pg_sleep(60)"
        screen.editor.focus()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: screen.session.running, what="the query to start")

        # Keys typed meanwhile land at once (each press is timed).
        screen.editor.move_cursor(screen.editor.document.end)
        slowest = 0.0
        for key in " -- typed meanwhile":
            started = time.monotonic()
            await pilot.press(key)
            slowest = max(slowest, time.monotonic() - started)
        assert screen.editor.text.endswith(" -- typed meanwhile")
        # Leave the editor and switch screens while the query still runs.
        started = time.monotonic()
        await pilot.press("escape", "1")
        assert isinstance(tui.screen, DashboardScreen)
        switch_s = time.monotonic() - started
        assert screen.session.running  # the keys did not wait for the 60 s query
        print(
            f"\nwhile pg_sleep(60) ran: slowest key press {slowest * 1000:.0f} ms, "
            f"leaving the editor and switching screens {switch_s * 1000:.0f} ms"
        )

        await pilot.press("4", "escape")  # back, and esc outside the editor cancels the query
        await wait_for(pilot, lambda: screen.message == "cancelled", timeout=4.0, what=f"the cancel ({screen.message})")
        assert not screen.session.running

        # The connection is usable again afterwards.
        message = await run(pilot, screen, "SELECT 1 AS one")
        assert message.startswith("1 row")


async def test_an_attribute_call_is_refused_on_screen_and_the_reader_note_shows(dsn, reader_dsn, db):
    seed_history(db)
    victim = db.info.backend_pid
    async with on_screen(dsn, "4", SqlScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        message = await run(
            pilot, screen, f"SELECT id FROM workflow_executions ORDER BY ({victim}).pg_terminate_backend"
        )
        assert message.startswith("refused: function pg_terminate_backend: "), message
        assert db.execute("SELECT 1").fetchone() == (1,)  # the victim session lives

        message = await run(pilot, screen, "SELECT current_user::text")
        assert message.startswith("1 row")
        assert str(screen.query_one(ResultsTable).get_row_at(0)[0]) == "kestrel_reader"
        assert screen.notice == ""  # a reader login: nothing weaker than promised to tell


# An admin's SECURITY DEFINER helper in `public`, which everyone may execute: it kills the
# session whose pid it gets. Before issue 9's red team the screen ran `(pid).kt_kill`.
ADMIN_HELPER = """
CREATE OR REPLACE FUNCTION public.kt_kill(integer) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER AS 'SELECT pg_terminate_backend($1)';
DROP DOMAIN IF EXISTS public.kt_dom;
CREATE DOMAIN public.kt_dom AS integer CHECK (public.kt_kill(VALUE));
"""


async def test_an_admins_helper_in_public_is_not_reached_from_the_screen(dsn, reader_dsn, db):
    db.execute(ADMIN_HELPER)
    victim = db.info.backend_pid
    async with on_screen(dsn, "4", SqlScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        message = await run(pilot, screen, f"SELECT ({victim}).kt_kill")
        assert message == (
            "error (at character 9): column notation .kt_kill applied to type integer, which is not a composite type"
        ), message
        message = await run(pilot, screen, f"SELECT {victim}::kt_dom")
        assert message.startswith("refused: type kt_dom: not a built-in type"), message
        message = await run(pilot, screen, f"SELECT {victim}::public.kt_dom")
        assert message.startswith("refused: type public.kt_dom: only pg_catalog types"), message
        assert db.execute("SELECT 1").fetchone() == (1,)  # the victim session lives
        message = await run(pilot, screen, "SELECT current_setting('search_path')")
        assert message.startswith("1 row")
        assert str(screen.query_one(ResultsTable).get_row_at(0)[0]) == "pg_catalog, kestrel, pg_temp"
