"""The executions filter's ``workflow:`` matches a prefix: docs/console.md's own example,
``workflow:remediate``, finds the demo's remediate-incident executions."""

from __future__ import annotations

from kestrel_console.tui.screens.executions import ExecutionsScreen

from .helpers import SIZE, console, fresh, open_screen, text_of, wait_for


async def test_workflow_filter_matches_a_prefix(dsn, db):
    ids = {
        name: db.execute(
            "INSERT INTO workflow_executions (workflow_name) VALUES (%s) RETURNING id", (name,)
        ).fetchone()[0]
        for name in ("remediate-incident", "ci-pipeline", "provision-resource")
    }
    async with console(dsn).run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "2", ExecutionsScreen)
        for typed, expected in (("workflow:remediate", "remediate-incident"), ("wf:ci", "ci-pipeline")):
            await pilot.press("slash")
            screen.query_one("#exec-filter").value = typed
            await pilot.press("enter")
            await fresh(pilot, screen)
            await wait_for(pilot, lambda: screen.table.keys() == [str(ids[expected])], what=typed)


async def test_an_empty_list_under_an_unknown_workflow_suggests_the_name_meant(dsn, db):
    db.execute("INSERT INTO workflow_executions (workflow_name, status) VALUES ('remediate-incident', 'success')")
    async with console(dsn).run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "2", ExecutionsScreen)
        where = screen.query_one("#exec-where")

        async def filter_by(typed: str) -> None:
            await pilot.press("slash")
            screen.query_one("#exec-filter").value = typed
            await pilot.press("enter")
            await fresh(pilot, screen)

        await filter_by("workflow:remediate-incidnet")
        await wait_for(pilot, lambda: "did you mean" in text_of(where), what="the suggestion")
        assert screen.table.keys() == []
        assert "no workflow named 'remediate-incidnet'; did you mean remediate-incident?" in text_of(where)
        # a known workflow with nothing matching the rest of the filter: empty, no suggestion
        await filter_by("workflow:remediate status:error")
        assert screen.table.keys() == [] and "no workflow named" not in text_of(where)
