"""Reports: shipped and user reports listed, a parameter form, the result table, CSV export."""

from __future__ import annotations

import csv
import threading

from textual.widgets import OptionList

from kestrel_console.tui.screens.reports import ReportsScreen
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.results import ResultsTable
from tests.seed import seed_history

from .helpers import SIZE, console, form_labels, rows, wait_for

MY_REPORT = """\
-- description: Executions of one workflow, oldest first
-- param: workflow text = 'remediate'
-- param: lim integer = 3
SELECT id, status FROM workflow_executions
 WHERE workflow_name = %(workflow)s::text
 ORDER BY id LIMIT %(lim)s::integer
"""
EXPECTED = "SELECT id, status FROM workflow_executions WHERE workflow_name = %s ORDER BY id LIMIT %s"


async def run_report(pilot, screen: ReportsScreen, key: str = "ctrl+r") -> str:
    before = screen.message
    await pilot.press(key)
    await wait_for(
        pilot, lambda: screen.message != before and not screen.message.startswith("running"), what="the report's result"
    )
    return screen.message


async def choose_report(pilot, name: str) -> ReportsScreen:
    """Open the Reports screen with its key and choose ``name``, as an operator does; the
    screen once ``name`` is the chosen report."""
    await pilot.press("5")
    screen = pilot.app.screen
    assert isinstance(screen, ReportsScreen)
    await wait_for(pilot, lambda: name in screen.reports, what="the report list")
    screen.select_report(name)
    await wait_for(pilot, lambda: screen.report is not None and screen.report.name == name, what=f"{name} chosen")
    return screen


async def report_by_keys(pilot, name: str) -> tuple[ReportsScreen, str]:
    """``choose_report``, then run it with ctrl+r; the screen and its status line once the
    result is shown, as an operator gets there (the palette's way is test_report_palette.py's)."""
    screen = await choose_report(pilot, name)
    return screen, await run_report(pilot, screen)


async def test_list_form_run_and_export(dsn, reader_dsn, db, tmp_path):
    seed_history(db)
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "my-report.sql").write_text(MY_REPORT)
    tui = console(dsn, queries=[folder], reader_dsn=reader_dsn)
    async with tui.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        screen = tui.screen
        assert isinstance(screen, ReportsScreen)
        await wait_for(pilot, lambda: "my-report" in screen.reports, what="the report list")
        assert not screen.reports["my-report"].shipped
        assert {"queue-depth", "stuck-leases", "pending-approvals"} <= {
            n for n, r in screen.reports.items() if r.shipped
        }

        screen.select_report("my-report")
        # The list's own first highlight may still be on its way: wait for the form to settle.
        await wait_for(pilot, lambda: list(screen.param_inputs) == ["workflow", "lim"], what="my-report's form")
        assert [box.value for box in screen.param_inputs.values()] == ["remediate", "3"]  # defaults

        message = await run_report(pilot, screen)
        table = screen.query_one(ResultsTable)
        expected = rows(db, EXPECTED, ("remediate", 3))
        assert message.startswith("my-report: 3 rows · ")
        assert [tuple(str(v) for v in table.get_row_at(i)) for i in range(table.row_count)] == [
            (str(i), s) for i, s in expected
        ]

        # Change a parameter in the form; enter in the last field runs the report.
        screen.param_inputs["workflow"].value = "billing-sync"
        screen.param_inputs["lim"].value = "100"
        screen.param_inputs["lim"].focus()
        message = await run_report(pilot, screen, key="enter")
        expected = rows(db, EXPECTED, ("billing-sync", 100))
        assert message.startswith(f"my-report: {len(expected)} rows")
        assert table.row_count == len(expected)

        # A value of the wrong type is refused before anything runs, naming the parameter.
        screen.param_inputs["lim"].value = "many"
        message = await run_report(pilot, screen)
        assert "lim" in message and "many" in message

        # Export the shown result to CSV.
        screen.param_inputs["lim"].value = "100"
        await run_report(pilot, screen)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(tui.screen, CommentModal))
        target = tmp_path / "out.csv"
        tui.screen.query_one("#comment-input").value = str(target)
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("exported" in m for _, m in tui.notices), what="the export")
        with target.open() as handle:
            written = list(csv.reader(handle))
        assert written == [["id", "status"]] + [[str(i), s] for i, s in expected]


async def test_a_shipped_report_runs(dsn, db):
    seed_history(db)
    tui = console(dsn)  # a superuser login, no reader: shipped reports still run
    async with tui.run_test(size=SIZE) as pilot:
        _, message = await report_by_keys(pilot, "stuck-leases")
        assert message.startswith("stuck-leases: 1 row"), message


async def test_two_reports_chosen_at_once_settle_on_the_second(dsn, db):
    """Choosing a report moves the list's highlight, whose message comes back later. Two
    reports chosen before the first message came back (the palette's choice right after the
    list's own first pick) chose each other again for ever and the console hung: CI's Pilot
    timeouts in the palette test."""
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        screen = await choose_report(pilot, "errors-this-month")
        options = screen.query_one("#rep-list", OptionList)
        screen.select_report("slowest-steps")
        screen.select_report("queue-depth")  # the line above has not come back yet
        await pilot.pause()
        assert screen.report.name == "queue-depth"
        assert options.highlighted == options.get_option_index("queue-depth")
        await wait_for(pilot, lambda: form_labels(screen) == ["workflow"], what="queue-depth's form alone")


async def test_a_second_run_asked_while_one_is_on_its_way_is_refused(dsn, db):
    """The session said it was running only once its thread held the connection: a second
    ctrl+r before that (or the command palette's own run, then ctrl+r) started a second run of
    the same report. Now a run is on its way from the key (``AdhocSession.reserve``)."""
    seed_history(db)
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        screen = await choose_report(pilot, "stuck-leases")
        assert screen.session is not None
        real_run = screen.session.run
        entered, release = threading.Event(), threading.Event()
        runs: list[int] = []

        def held_run(fn):
            runs.append(1)
            entered.set()
            release.wait(10)
            return real_run(fn)

        screen.session.run = held_run  # type: ignore[method-assign]
        await pilot.press("ctrl+r")
        await wait_for(pilot, entered.is_set, what="the run's thread")
        await pilot.press("ctrl+r")
        assert screen.message == "a report is still running"
        release.set()
        await wait_for(pilot, lambda: screen.message.startswith("stuck-leases: "), what="the report's result")
        assert runs == [1]
        await pilot.press("ctrl+r")  # its result shown, it runs again
        await wait_for(pilot, lambda: runs == [1, 1], what="a second run")
