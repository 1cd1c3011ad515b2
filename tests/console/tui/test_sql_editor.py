"""The SQL editor (issue 11, item 6): typing replaces the sample, ctrl+a selects all, ctrl+l
clears, a refusal leaves no old result under it, and the query history survives a restart."""

from __future__ import annotations

import json
from pathlib import Path

from kestrel_console.tui.history import QueryHistory
from kestrel_console.tui.screens.sql import HINT, SqlScreen
from kestrel_console.tui.widgets.results import ResultsTable
from tests.seed import seed_history

from .helpers import SIZE, console, on_screen, open_screen, wait_for

CONSOLE_DOC = Path(__file__).resolve().parents[3] / "docs" / "console.md"


async def ran(pilot, screen: SqlScreen) -> str:
    screen.message = ""  # two results may read the same ("1 row · 0.4 ms"): wait for a new one
    await pilot.press("ctrl+r")
    await wait_for(
        pilot, lambda: screen.message and not screen.message.startswith("running"), what="the query's result"
    )
    return screen.message


async def test_typing_replaces_the_sample_and_refusals_clear_the_result(dsn, reader_dsn, db):
    seed_history(db)
    async with on_screen(dsn, "4", SqlScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        await pilot.press(*"SELECT 41 + 1 AS answer")
        assert screen.editor.text == "SELECT 41 + 1 AS answer"
        assert (await ran(pilot, screen)).startswith("1 row")
        table = screen.query_one(ResultsTable)
        assert table.row_count == 1

        await pilot.press("ctrl+a", *"DELETE FROM workflow_executions")
        assert screen.editor.text == "DELETE FROM workflow_executions"
        assert (await ran(pilot, screen)).startswith("refused:")
        assert table.row_count == 0 and not table.columns and screen.result is None

        await pilot.press("ctrl+l")
        assert screen.editor.text == ""

        # The hint and the console's docs name the same key for leaving the editor.
        assert "esc leaves the editor" in HINT
        assert "esc leaves the editor" in CONSOLE_DOC.read_text()


async def test_history_is_kept_between_sessions(dsn, reader_dsn, db, private_state_home):
    seed_history(db)
    queries = ["SELECT 1 AS one", "SELECT 2 AS two", "SELECT 3 AS three"]
    async with on_screen(dsn, "4", SqlScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        for query in queries:
            await pilot.press("ctrl+a", *query)
            assert (await ran(pilot, screen)).startswith("1 row")
    saved = private_state_home / "kestrel" / "sql-history.json"
    assert json.loads(saved.read_text()) == queries[::-1]

    again = console(dsn)
    async with again.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "4", SqlScreen)
        assert screen.history == queries[::-1]
        await pilot.press("ctrl+l", "up")  # on the first line: the newest past query
        assert screen.editor.text == "SELECT 3 AS three"
        await pilot.press("up", "up")
        assert screen.editor.text == "SELECT 1 AS one"
        await pilot.press("down")
        assert screen.editor.text == "SELECT 2 AS two"
        await pilot.press("ctrl+up")
        assert screen.editor.text == "SELECT 1 AS one"


def test_history_is_capped_and_keeps_one_copy(tmp_path):
    history = QueryHistory(tmp_path / "h.json", limit=3)
    for query in ["a", "b", "c", "a", "d"]:
        history.add(query)
    assert history.entries == ["d", "a", "c"]
    assert QueryHistory(tmp_path / "h.json", limit=3).load() == ["d", "a", "c"]
