"""The executions filter's ``workflow:`` matches a prefix: the README's own example,
``workflow:remediate``, finds the demo's remediate-incident executions."""

from __future__ import annotations

from kestrel_console.tui.screens.executions import ExecutionsScreen

from .helpers import SIZE, console, fresh, open_screen, wait_for


async def test_workflow_filter_matches_a_prefix(dsn, db):
    ids = {name: db.execute("INSERT INTO workflow_executions (workflow_name) VALUES (%s) RETURNING id",
                            (name,)).fetchone()[0]
           for name in ("remediate-incident", "ci-pipeline", "provision-resource")}
    async with console(dsn).run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "2", ExecutionsScreen)
        for typed, expected in (("workflow:remediate", "remediate-incident"), ("wf:ci", "ci-pipeline")):
            await pilot.press("slash")
            screen.query_one("#exec-filter").value = typed
            await pilot.press("enter")
            await fresh(pilot, screen)
            await wait_for(pilot, lambda: screen.table.keys() == [str(ids[expected])], what=typed)
