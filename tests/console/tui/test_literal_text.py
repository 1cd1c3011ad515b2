"""Every screen shows text from the database literally: markup, emoji codes, links, wide
characters and brackets as they are stored, control characters as escapes (issue 20, defect 2).

Textual reads a ``str`` handed to a table cell, a label or an option as markup: Kestrel's own
step id ``wait-all:child:resize+2`` showed a child emoji, ``[bold]lgtm[/bold]`` bold text."""

from __future__ import annotations

import pytest

from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.screens.queues import QueuesScreen
from kestrel_console.tui.screens.schedules import SchedulesScreen
from kestrel_console.tui.screens.sql import SqlScreen
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal
from tests.hostile_text import (
    MARKUP_COMMENT,
    MARKUP_CONTROL_SHOWN,
    MARKUP_GATE,
    MARKUP_NAME,
    MARKUP_QUEUE,
    MARKUP_SCHEDULE,
    MARKUP_STEP,
    MARKUP_WIDE,
    MARKUP_WORKER,
    markup_world,
)

from .helpers import console, fresh, give_reason, open_screen, screen_lines, wait_for
from .test_reports import report_by_keys
from .test_sql import run

# What markup and emoji codes turn into when they are obeyed.
OBEYED = ("🧒", "🔥", "🚀")


def shown(app) -> str:
    return "\n".join(screen_lines(app))


async def finds(pilot, *texts: str) -> str:
    """Wait until the terminal shows every one of ``texts`` literally; returns the screen."""
    await wait_for(
        pilot,
        lambda: all(t in shown(pilot.app) for t in texts),
        what=f"{texts} on the screen, literally (it shows:\n{shown(pilot.app)})",
    )
    screen = shown(pilot.app)
    assert not any(e in screen for e in OBEYED), screen
    return screen


@pytest.mark.parametrize("size", [(200, 50)])
async def test_every_screen_dialog_and_toast_shows_stored_text_literally(dsn, reader_dsn, db, size):
    ids = markup_world(db)
    tui = console(dsn, reader_dsn=reader_dsn)
    async with tui.run_test(size=size, notifications=True) as pilot:
        await open_screen(pilot, "1", DashboardScreen)
        await finds(pilot, MARKUP_NAME, MARKUP_WORKER, MARKUP_WIDE)

        await open_screen(pilot, "2", ExecutionsScreen)
        await finds(pilot, MARKUP_NAME, MARKUP_WIDE, MARKUP_GATE, MARKUP_WORKER, MARKUP_CONTROL_SHOWN)

        await open_screen(pilot, "3", ApprovalsScreen)
        await finds(pilot, MARKUP_NAME, MARKUP_GATE, MARKUP_COMMENT)

        detail = DetailScreen(ids["waiting"])
        await pilot.app.push_screen(detail)
        await fresh(pilot, detail)
        await finds(pilot, MARKUP_NAME, MARKUP_STEP, MARKUP_COMMENT)
        await pilot.press("a")  # the comment prompt names the gate
        await wait_for(pilot, lambda: isinstance(tui.screen, CommentModal), what="the comment prompt")
        await finds(pilot, MARKUP_GATE)
        await pilot.press("escape")
        await wait_for(pilot, lambda: tui.screen is detail, what="the prompt to close")
        await pilot.press("c")  # the confirmation names the workflow
        await give_reason(pilot)
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal), what="the confirmation")
        await finds(pilot, MARKUP_NAME)
        await pilot.press("n")
        await wait_for(pilot, lambda: tui.screen is detail, what="the confirmation to close")
        await pilot.press("q")

        sql = await open_screen(pilot, "4", SqlScreen)
        await run(pilot, sql, 'SELECT comment AS "[b]c:fire:", step_id FROM workflow_waits ORDER BY step_id')
        await finds(pilot, "[b]c:fire:", MARKUP_COMMENT, MARKUP_GATE)

        await pilot.press("escape")  # out of the SQL editor, so 5 is not typed into it
        await report_by_keys(pilot, "pending-approvals")
        await finds(pilot, MARKUP_NAME, MARKUP_GATE)

        queues = await open_screen(pilot, "6", QueuesScreen)
        await finds(pilot, MARKUP_QUEUE, f"paused by {MARKUP_WORKER}", MARKUP_NAME)
        queues.table.move_cursor(row=queues.table.get_row_index(MARKUP_QUEUE))
        await pilot.press("h")  # the pause/resume confirmation and its toast name the queue
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal), what="the confirmation")
        await finds(pilot, MARKUP_QUEUE)
        await pilot.press("y")
        await finds(pilot, f"resumed queue {MARKUP_QUEUE!r}")

        await open_screen(pilot, "7", SchedulesScreen)
        await finds(pilot, MARKUP_SCHEDULE, MARKUP_NAME, f"{MARKUP_SCHEDULE}: paused by {MARKUP_WORKER}")
        await pilot.press("ctrl+q")
