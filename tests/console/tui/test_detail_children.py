"""The detail screen shows an execution's parent and children."""

from __future__ import annotations

from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.widgets.timeline import Timeline

from .helpers import SIZE, console, fresh, text_of


async def test_detail_head_links_parent_and_children(dsn, db):
    parent = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status) VALUES ('fan', 'waiting') RETURNING id"
    ).fetchone()[0]
    child = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, parent_id) VALUES ('leaf', 'error', %s) RETURNING id",
        (parent,),
    ).fetchone()[0]
    db.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, details) VALUES (%s, 'wait:child:leaf',"
        " 'child', jsonb_build_object('children', jsonb_build_array(%s::bigint)))",
        (parent, child),
    )
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        screen = DetailScreen(parent)
        await pilot.app.push_screen(screen)
        await fresh(pilot, screen)
        assert f"children (1): #{child} error" in text_of(screen.query_one("#detail-head"))
        lines = [line.plain for line in screen.query_one(Timeline).lines(140)]
        assert any(line.startswith("⇉ wait:child:leaf") for line in lines), lines
        pilot.app.pop_screen()
        screen = DetailScreen(child)
        await pilot.app.push_screen(screen)
        await fresh(pilot, screen)
        head = text_of(screen.query_one("#detail-head"))
        assert f"parent #{parent}" in head and "children" not in head
