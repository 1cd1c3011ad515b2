"""Issue 18 on the SQL and Reports screens: a superuser console without a reader login refuses
ad-hoc SQL and user reports in one line; the opt-in is marked on the screen; the
string-continuation shapes are refused on the screen as a superuser and as an operator login.

Before the fix: the superuser's queries ran (a note under the status), and so did the shapes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from kestrel_console.tui.screens.reports import ReportsScreen
from kestrel_console.tui.screens.sql import SqlScreen
from tests.console.adhoc.hostile_sql import CODES, OPENERS, shape

from .helpers import SIZE, console, on_screen, open_screen, wait_for
from .test_reports import run_report
from .test_sql import run

# One shape per opener and one per code: every variant of the lexing, every kind of code.
SCREEN_SHAPES = [(shape(CODES[0][0], opener), CODES[0][1]) for opener in OPENERS] + [
    (shape(code), name) for code, name in CODES[1:]
]


async def test_a_superuser_console_refuses_sql_and_user_reports_without_a_reader(dsn, db, tmp_path: Path):
    (tmp_path / "mine.sql").write_text("-- description: mine\nSELECT 1 AS one\n")
    user = conninfo_to_dict(dsn)["user"]
    async with on_screen(dsn, "4", SqlScreen, queries=[tmp_path]) as (tui, pilot, screen):
        message = await run(pilot, screen, "SELECT 1 AS one")
        assert message.startswith(f"refused: login {user} is a superuser: ad-hoc SQL does not run on such a login"), (
            message
        )
        assert "--reader-dsn" in message and "\n" not in message
        await pilot.press("escape")  # out of the editor, so that 5 switches screens
        reports = await open_screen(pilot, "5", ReportsScreen)
        await wait_for(pilot, lambda: "mine" in reports.reports, what="the report list")
        reports.select_report("mine")
        await wait_for(pilot, lambda: reports.report is not None and reports.report.name == "mine", what="mine")
        message = await run_report(pilot, reports)
        assert message.startswith(f"refused: login {user} is a superuser: "), message


async def test_the_opt_in_is_marked_on_the_sql_screen(dsn, db):
    async with on_screen(dsn, "4", SqlScreen, allow_privileged_sql=True) as (tui, pilot, screen):
        assert "--allow-privileged-sql" in str(screen.editor.border_title)
        message = await run(pilot, screen, "SELECT current_user::text AS who")
        assert message.startswith("1 row"), message
        assert "(ad-hoc SQL allowed on it by --allow-privileged-sql)" in screen.notice


@pytest.mark.parametrize("who", ["superuser", "operator"])
async def test_the_string_continuation_shapes_are_refused_on_the_screen(who, dsn, operator_dsn, db):
    tui = console(dsn, allow_privileged_sql=True) if who == "superuser" else console(operator_dsn)
    async with tui.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "4", SqlScreen)
        for query, name in SCREEN_SHAPES:
            screen.message = ""
            message = await run(pilot, screen, query)
            assert message.startswith((f"refused: function {name}: ", "refused: cannot parse: ")), (query, message)
    assert db.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'kt_slot'").fetchone() == (0,)
