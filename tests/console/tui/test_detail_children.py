"""The detail screen shows an execution's parent and children, and opens them with enter."""

from __future__ import annotations

import pytest

from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.widgets.live_table import LiveTable
from kestrel_console.tui.widgets.timeline import Timeline
from tests.seed import seed_family

from .helpers import SIZE, console, focus, fresh, screen_lines, text_of, wait_for


async def open_family(pilot, execution_id: int) -> tuple[DetailScreen, LiveTable]:
    """The detail screen of ``execution_id``, pushed and refreshed, and its family panel."""
    screen = DetailScreen(execution_id)
    await pilot.app.push_screen(screen)
    await fresh(pilot, screen)
    await wait_for(pilot, lambda: screen.query("#detail-family"), what="the family panel")
    return screen, screen.query_one("#detail-family", LiveTable)


async def test_detail_head_links_parent_and_children(dsn, db):
    parent, (child,) = seed_family(db, [("leaf", "error")])
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


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_enter_on_a_child_opens_it_and_on_the_parent_goes_back_up(dsn, db, size):
    """Parent/child drill-down (issue 20): the links were text in the head, nothing to open."""
    parent, kids = seed_family(db, [("leaf", "success"), ("mk:child:wf", "error")])
    tui = console(dsn)
    async with tui.run_test(size=size) as pilot:
        screen, family = await open_family(pilot, parent)
        await wait_for(pilot, lambda: family.keys() == [str(k) for k in kids], what="the children")
        assert family.shown(str(kids[1]), "workflow") == "mk:child:wf"
        await focus(pilot, family)

        def drawn() -> bool:
            shown = "\n".join(screen_lines(tui))
            return "child" in shown and str(kids[1]) in shown and "mk:child:wf" in shown

        # The rows are in the table before they are drawn: on a loaded machine the panel was
        # seen drawn empty (borders only) after two settled frames; it must show them in time.
        await wait_for(pilot, drawn, what="the children drawn in the panel")
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen) and tui.screen is not screen)
        child = tui.screen
        assert child.execution_id == kids[1]
        await fresh(pilot, child)
        await wait_for(pilot, lambda: child.query("#detail-family"), what="the family panel")
        links = child.query_one("#detail-family", LiveTable)
        await wait_for(pilot, lambda: links.keys() == [str(parent)], what="the parent")
        assert links.shown(str(parent), "relation") == "parent" and links.shown(str(parent), "status") == "waiting"
        await focus(pilot, links)
        await pilot.press("enter")
        await wait_for(pilot, lambda: tui.screen is not child and isinstance(tui.screen, DetailScreen))
        assert tui.screen.execution_id == parent
        await pilot.press("escape")
        assert tui.screen is child


async def test_an_execution_with_no_family_shows_no_panel(dsn, db):
    alone = db.execute("INSERT INTO workflow_executions (workflow_name) VALUES ('solo') RETURNING id").fetchone()[0]
    tui = console(dsn)
    async with tui.run_test(size=(80, 24)) as pilot:
        screen = DetailScreen(alone)
        await pilot.app.push_screen(screen)
        await fresh(pilot, screen)
        assert not [family for family in screen.query("#detail-family") if family.display]


async def test_a_refresh_that_lands_before_the_new_panel_has_its_columns_waits_for_them(dsn, db):
    """The family panel is mounted by the first refresh that finds a parent or children; a second
    refresh landing before the panel's own mount (its columns) added its rows to a table with no
    columns: "More values provided than there are columns" ended the console (seen in CI)."""
    parent, (child,) = seed_family(db, [("leaf", "enqueued")])
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        screen, family = await open_family(pilot, parent)
        await family.remove()
        data = (screen.execution, screen.entries, screen.steps, screen.blocker)
        screen.show(data)  # mounts the panel
        screen.show(data)  # the next refresh, before the panel's on_mount
        await wait_for(pilot, lambda: screen.query("#detail-family"), what="the family panel")
        family = screen.query_one("#detail-family", LiveTable)
        await wait_for(pilot, lambda: family.keys() == [str(child)], what="the child's row")
