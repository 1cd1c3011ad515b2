"""The dashboard shows exactly what SQL counts, before and after the data changes."""

from __future__ import annotations

import time

from kestrel_console.tui.app import TICK_S
from kestrel_console.tui.config import REFRESH_PRESETS
from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.widgets.live_table import LiveTable
from kestrel_core import STATUSES
from tests.seed import seed_bulk_finished, seed_history

from .helpers import COUNT_BY_STATUS, COUNT_BY_WORKFLOW_STATUS, SIZE, console, fresh, rows, text_of, wait_for


def sql_counts(db) -> dict[str, int]:
    counts = {s: 0 for s in STATUSES}
    counts.update({status: n for status, n in rows(db, COUNT_BY_STATUS)})
    return counts


def check_matches_sql(screen: DashboardScreen, db) -> None:
    expected = sql_counts(db)
    assert screen.counts == expected
    for status in STATUSES:  # and that is what the screen shows
        shown = text_of(screen.query_one(f"#count-{status}")).split()
        assert shown == [status, f"{expected[status]:,}"]
    depth = screen.query_one("#dash-depth", LiveTable)
    by_workflow: dict[str, dict[str, int]] = {}
    for name, status, n in rows(db, COUNT_BY_WORKFLOW_STATUS):
        by_workflow.setdefault(name, {})[status] = n
    assert depth.keys() == sorted(by_workflow)
    for name, counts in by_workflow.items():
        for status in STATUSES:
            assert depth.shown(name, status) == f"{counts.get(status, 0):,}", (name, status)


async def test_dashboard_counts_equal_sql_after_changes(dsn, db, app):
    facts = seed_history(db)
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        screen = tui.screen
        assert isinstance(screen, DashboardScreen)
        await fresh(pilot, screen)
        check_matches_sql(screen, db)
        assert "approvals pending 2" in text_of(screen.query_one("#dash-approvals"))
        assert text_of(screen.query_one("#dash-errors")) == "errors in the last hour 1"
        assert screen.query_one("#dash-stuck", LiveTable).keys() == [str(facts.id("stuck"))]
        workers = screen.query_one("#dash-workers", LiveTable)
        assert set(workers.keys()) == {"worker-a", "worker-b", "worker-dead"}  # worker-old stopped a day ago
        assert workers.shown("worker-dead", "state") == "silent"

        # The data changes: new work, a cancel, a decision, a big batch of history.
        app.enqueue_many("billing-sync", [{"account": i} for i in range(7)])
        app.cancel(facts.id("running"), by="someone")
        app.approve(facts.id("pending_approval"), "approve-fix", by="someone")
        seed_bulk_finished(db, 1234, workflow_name="bulk", analyze=False)
        await fresh(pilot, screen)
        check_matches_sql(screen, db)
        assert "approvals pending 1" in text_of(screen.query_one("#dash-approvals"))


def count_due_ticks_while_paused(tui) -> list[int]:
    """The console's refresh clock (``_tick``, every 0.1 s) counted each time it runs while
    paused with the live screen's refresh overdue (so none in flight): each is a refresh an
    unpaused console would start. Appends the screen's ``loads`` after the real tick ran."""
    seen: list[int] = []
    real = tui._tick

    def tick() -> None:
        screen = tui.live_screen()
        due = tui.paused and screen is not None and screen.due(time.monotonic(), tui.refresh_interval)
        real()
        if due:
            seen.append(screen.loads)

    tui._tick = tick  # before mounting: the app's interval timer takes it then
    return seen


async def test_refresh_presets_and_pause(dsn, db):
    tui = console(dsn, refresh=2.0)
    due_ticks = count_due_ticks_while_paused(tui)
    async with tui.run_test(size=SIZE) as pilot:
        screen = tui.screen
        await fresh(pilot, screen)
        await pilot.press("minus")
        assert tui.refresh_interval == 1.0
        await pilot.press("plus", "plus")
        assert tui.refresh_interval == 5.0
        for _ in REFRESH_PRESETS:
            await pilot.press("plus")
        assert tui.refresh_interval == REFRESH_PRESETS[-1]
        assert "refresh 30 s" in tui.sub_title

        tui.set_refresh(0.5)
        await pilot.press("p")  # pause on the dashboard
        assert tui.paused and "PAUSED" in tui.sub_title
        # Not a fixed wait: the clock must find a refresh due (none in flight) and skip it,
        # again and again, while paused.
        ticks = round(tui.refresh_interval / TICK_S) + 1  # a whole refresh interval of them
        await wait_for(pilot, lambda: len(due_ticks) >= ticks, what=f"{ticks} refresh ticks due while paused")
        assert due_ticks == [due_ticks[0]] * len(due_ticks), due_ticks  # no refresh between them
        loads = screen.loads
        assert loads == due_ticks[0]
        await pilot.press("p")  # resume
        assert not tui.paused
        await wait_for(pilot, lambda: screen.loads > loads, what="a refresh after resuming")


STOPPED_WORKER = """
INSERT INTO workers (worker_id, hostname, pid, workflows, concurrency, started_at, last_heartbeat, stopped_at)
VALUES (%s, 'host-z', 1, ARRAY['billing-sync'], 2, now() - interval '20 minutes',
        now() - interval '5 minutes', now() - interval '5 minutes')
"""


async def test_stopped_workers_are_counted_apart_after_the_live_ones(dsn, db):
    """issue 11, item 8: every worker seen in the last hour was listed, stopped ones mixed in."""
    seed_history(db)
    for n in range(4):
        db.execute(STOPPED_WORKER, (f"demo-{n}@old",))
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        screen = tui.screen
        await fresh(pilot, screen)
        workers = screen.query_one("#dash-workers", LiveTable)
        assert workers.keys() == ["worker-a", "worker-b", "worker-dead", "stopped"]
        assert workers.shown("stopped", "worker") == "+ 4 stopped"
        assert [workers.shown(k, "state") for k in workers.keys()] == ["alive", "alive", "silent", "stopped"]
