"""The detail screen shows an execution's parent and children."""

from __future__ import annotations

from kestrel_console.tui.screens.detail import DetailScreen

from .helpers import SIZE, console, fresh, text_of


async def test_detail_head_links_parent_and_children(dsn, db):
    parent = db.execute("INSERT INTO workflow_executions (workflow_name, status) VALUES ('fan', 'waiting')"
                        " RETURNING id").fetchone()[0]
    child = db.execute("INSERT INTO workflow_executions (workflow_name, status, parent_id)"
                       " VALUES ('leaf', 'error', %s) RETURNING id", (parent,)).fetchone()[0]
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        screen = DetailScreen(parent)
        await pilot.app.push_screen(screen)
        await fresh(pilot, screen)
        assert f"children (1): #{child} error" in text_of(screen.query_one("#detail-head"))
        pilot.app.pop_screen()
        screen = DetailScreen(child)
        await pilot.app.push_screen(screen)
        await fresh(pilot, screen)
        head = text_of(screen.query_one("#detail-head"))
        assert f"parent #{parent}" in head and "children" not in head
