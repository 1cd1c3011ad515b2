"""The SQL screen (issue 46, findings 1 and 9): ``ctrl+r`` runs exactly what the editor holds
once the keys typed before it are in, even when the editor is slow to take them (a slowed
event loop); the status line says what ran, and a selection that runs alone is said to; sqlglot
formats the query and completes table and column names from the live schema."""

from __future__ import annotations

import asyncio

import pytest
from textual import events
from textual.keys import _character_to_key
from textual.widgets import TextArea

from kestrel_console.tui.screens.sql import SqlEditor, SqlScreen
from kestrel_console.tui.sql_assist import format_sql

from .helpers import on_screen, wait_for

SLOW_KEY_S = 0.02  # each key the editor takes waits this long first: keys queue up behind it


@pytest.fixture
def slow_editor(monkeypatch):
    """The editor takes each key only after a pause, as on a loaded machine: keys typed fast
    wait in its queue while the app goes on handling what arrives (priority bindings)."""
    original = TextArea._on_key

    async def slowly(self, event):
        await asyncio.sleep(SLOW_KEY_S)
        await original(self, event)

    monkeypatch.setattr(SqlEditor, "_on_key", slowly)


def burst(app, text: str, *then: str) -> None:
    """Queue every key of ``text`` (then the keys ``then``) at once, without waiting for any
    to be handled: what a terminal delivers when the operator types faster than the app."""
    for ch in text:
        key = _character_to_key(ch) if not ch.isalnum() else ch
        if ch == "\n":
            key, ch = "enter", "\r"
        app.post_message(events.Key(key, ch))
    for key in then:
        app.post_message(events.Key(key, None))


async def result_of(pilot, screen: SqlScreen) -> str:
    await wait_for(
        pilot,
        lambda: screen.message and not screen.message.startswith(("running", "ctrl+r")),
        what="the query's result",
    )
    return screen.message


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_ctrl_r_runs_every_key_typed_before_it(dsn, reader_dsn, slow_editor, size):
    query = "SELECT 40 + 2 AS answer, 'typed at full speed' AS how"
    async with on_screen(dsn, "4", SqlScreen, size=size, reader_dsn=reader_dsn) as (tui, pilot, screen):
        screen.message = ""
        burst(tui, query, "ctrl+r")
        message = await result_of(pilot, screen)
        assert screen.history[0] == query  # not a prefix, not the sample it replaced
        assert screen.editor.text == query
        assert message.startswith("1 row"), message
        assert "ran the whole editor (1 line, " in message and "SELECT 40 + 2 AS answer" in message


async def test_a_second_query_typed_after_ctrl_a_runs_whole(dsn, reader_dsn, slow_editor):
    async with on_screen(dsn, "4", SqlScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        burst(tui, "SELECT 1 AS one", "ctrl+r")
        await result_of(pilot, screen)
        screen.message, screen.ran = "", ""
        burst(tui, "", "ctrl+a")
        burst(tui, "SELECT 2 AS two, 3 AS three", "f5")
        await result_of(pilot, screen)
        assert screen.history[0] == "SELECT 2 AS two, 3 AS three"


async def test_a_selection_runs_alone_and_is_said_to(dsn, reader_dsn):
    async with on_screen(dsn, "4", SqlScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        await pilot.press("ctrl+l", *"SELECT 1 AS first", "enter", *"SELECT 2 AS second")
        assert screen.editor.border_subtitle == "ctrl+r runs the whole editor"
        await pilot.press("shift+home")  # the second line selected
        assert screen.editor.border_subtitle == "ctrl+r runs the selection"
        screen.message = ""
        await pilot.press("ctrl+r")
        message = await result_of(pilot, screen)
        assert screen.history[0] == "SELECT 2 AS second"
        assert "ran the selection (1 line, 18 chars): SELECT 2 AS second" in message, message

        # The whole text selected is the whole editor, said so.
        await pilot.press("ctrl+a")
        assert screen.editor.border_subtitle == "ctrl+r runs the whole editor"


async def test_a_refusal_says_what_ran(dsn, reader_dsn):
    async with on_screen(dsn, "4", SqlScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        await pilot.press("ctrl+l", *"DELETE FROM workflow_executions")
        screen.message = ""
        await pilot.press("ctrl+r")
        message = await result_of(pilot, screen)
        assert message.startswith("refused:") and "(ran the whole editor (1 line, 31 chars)" in message, message


async def test_ctrl_f_formats_with_sqlglot_after_queued_keys(dsn, reader_dsn, slow_editor):
    typed = "select status, count(*) from workflow_executions where status = 'error' group by status"
    async with on_screen(dsn, "4", SqlScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        burst(tui, typed, "ctrl+f")
        await wait_for(pilot, lambda: screen.message.startswith("formatted"), what="the formatting")
        assert screen.editor.text == format_sql(typed)
        assert screen.editor.text.startswith("SELECT\n  status,\n  COUNT(*)\nFROM workflow_executions\n")

        await pilot.press("ctrl+l", *"select * from")
        await pilot.press("ctrl+f")
        await wait_for(pilot, lambda: screen.message.startswith("not formatted"), what="the refusal")
        assert screen.editor.text == "select * from"  # left as typed


async def test_ctrl_n_completes_tables_and_columns_from_the_live_schema(dsn, reader_dsn, db):
    db.execute("CREATE TABLE kestrel.zz_ops_notes (note_id int, noted_by text, noted_at timestamptz)")
    async with on_screen(dsn, "4", SqlScreen, reader_dsn=reader_dsn) as (tui, pilot, screen):
        await pilot.press("ctrl+l", *"SELECT * FROM zz_ops_n", "ctrl+n")
        await wait_for(pilot, lambda: screen.editor.text.endswith("zz_ops_notes"), what="the table's name")

        # A column of the aliased table, the FROM after the cursor.
        await pilot.press("ctrl+l", *"SELECT n.noted_ FROM zz_ops_notes n", "home", *["right"] * 15)
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: "2 names: noted_by, noted_at" in screen.message, what="the two columns")
        assert screen.editor.text == "SELECT n.noted_ FROM zz_ops_notes n"  # nothing in common past noted_
        await pilot.press(*"a", "ctrl+n")
        await wait_for(pilot, lambda: screen.editor.text == "SELECT n.noted_at FROM zz_ops_notes n", what="noted_at")
        assert screen.message == "completed noted_at"
