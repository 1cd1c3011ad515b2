"""The executions list: newest first, filtered, updated in place; marking rows and
re-enqueueing or cancelling them through the keys, or being refused in --read-only mode."""

from __future__ import annotations

from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import PAGE_SIZE, ExecutionsScreen
from tests.seed import seed_bulk_finished, seed_history

from .helpers import (
    ACTIONS,
    OPERATOR,
    acting_on,
    actions_settled,
    fresh,
    on_screen,
    reason_then_confirmation,
    rows,
    statuses,
    wait_for,
)


async def put_cursor(pilot, screen: ExecutionsScreen, execution_id: int) -> None:
    screen.table.move_cursor(row=screen.table.get_row_index(str(execution_id)))
    await pilot.pause()


async def test_list_filter_and_in_place_updates(dsn, db, app):
    facts = seed_history(db)
    async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
        table = screen.table
        every = sorted((e.id for e in facts.executions.values()), reverse=True)
        assert table.keys() == [str(i) for i in every]
        stuck = facts.execution(facts.id("stuck"))
        assert table.shown(str(stuck.id), "status") == "running"
        assert table.shown(str(stuck.id), "owner") == "worker-dead"
        assert table.shown(str(stuck.id), "step") == "fetch"
        assert table.rows_added == len(every)

        # Changes arrive as cell updates; only the new execution is added (at the top).
        new_id = app.enqueue("billing-sync", {"account": 99})
        app.cancel(stuck.id, by="someone")
        await fresh(pilot, screen)
        assert table.keys()[0] == str(new_id)
        assert table.keys()[1:] == [str(i) for i in every]
        assert table.shown(str(stuck.id), "status") == "cancelled"
        assert table.rows_added == len(every) + 1

        # `/` filters: by status, by workflow, by free text.
        await pilot.press("slash")
        await pilot.press(*"status:error", "enter")
        await fresh(pilot, screen)
        errors = sorted((e.id for e in facts.with_status("error")), reverse=True)
        assert table.keys() == [str(i) for i in errors]
        await pilot.press("slash", "ctrl+u")
        await pilot.press(*"workflow:remediate worker-b", "enter")  # free text matches the owner
        await fresh(pilot, screen)
        expected = sorted(
            (e.id for e in facts.executions.values() if e.workflow_name == "remediate" and e.owner_id == "worker-b"),
            reverse=True,
        )
        assert expected and table.keys() == [str(i) for i in expected]
        await pilot.press("slash", "ctrl+u")
        await pilot.press(*"upstream", "enter")
        await fresh(pilot, screen)
        assert table.keys() == [str(facts.id("failed_last_hour"))]
        await pilot.press("slash", "ctrl+u")
        await pilot.press(*"status:bogus", "enter")
        assert any("unknown status 'bogus'" in m for _, m in tui.notices)
        await pilot.press("escape", "escape")  # close the filter line, then clear the filter
        await fresh(pilot, screen)
        assert len(table.keys()) == len(every) + 1

        # enter opens the execution.
        await put_cursor(pilot, screen, facts.id("approved"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen))
        assert tui.screen.execution_id == facts.id("approved")
        await pilot.press("q")
        assert tui.screen is screen


async def test_mark_several_and_cancel_all(dsn, db):
    facts = seed_history(db)
    async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
        chosen = [facts.id("enqueued"), facts.id("delayed"), facts.id("sleeping")]
        for eid in chosen:
            await put_cursor(pilot, screen, eid)
            await pilot.press("space")
        assert screen.table.marks == {str(i) for i in chosen}
        before = statuses(db)

        await pilot.press("c")
        question = await reason_then_confirmation(pilot)
        assert question.startswith("Cancel 3 executions?")
        for eid in chosen:  # each named with its state
            assert f"execution {eid} ({facts.execution(eid).workflow_name}), now {before[eid]}" in question
        assert f"Recorded as {OPERATOR!r}" in question
        await pilot.press("y")

        await wait_for(pilot, lambda: all(statuses(db)[i] == "cancelled" for i in chosen), what="the cancels")
        after = statuses(db)
        assert {i: s for i, s in after.items() if i not in chosen} == {
            i: s for i, s in before.items() if i not in chosen
        }
        assert sorted(rows(db, ACTIONS), key=lambda r: r[2]) == [
            (OPERATOR, "cancel", eid, None, None, before[eid]) for eid in sorted(chosen)
        ]
        await wait_for(pilot, lambda: not screen.table.marks)
        await wait_for(pilot, lambda: all(screen.table.shown(str(i), "status") == "cancelled" for i in chosen))


async def test_requeue_and_refusals(dsn, db):
    facts = seed_history(db)
    async with acting_on(dsn, "2", ExecutionsScreen) as (tui, pilot, screen, actions):
        failed = facts.id("failed_recent")
        await put_cursor(pilot, screen, failed)
        await pilot.press("e")
        await reason_then_confirmation(pilot)
        assert f"Re-enqueue execution {failed} (remediate), now error?" in tui.screen.question
        await pilot.press("n")  # no: nothing changes
        await actions_settled(pilot, screen)
        assert actions == []
        assert statuses(db)[failed] == "error" and rows(db, ACTIONS) == []

        await pilot.press("e")
        await reason_then_confirmation(pilot)
        await pilot.press("y")
        await wait_for(pilot, lambda: statuses(db)[failed] == "enqueued", what="the requeue")
        assert rows(db, ACTIONS) == [(OPERATOR, "requeue", failed, None, None, "error")]

        # A finished execution cannot be cancelled: not offered, said at once, nothing written.
        done = facts.id("quick")
        await fresh(pilot, screen)
        await put_cursor(pilot, screen, done)
        await pilot.press("c")
        await wait_for(pilot, lambda: any("can be cancelled" in m for _, m in tui.notices), what="the refusal")
        assert tui.screen is screen
        assert statuses(db)[done] == "success"
        assert len(rows(db, ACTIONS)) == 1


async def test_read_only_refuses_actions(dsn, db):
    facts = seed_history(db)
    async with acting_on(dsn, "2", ExecutionsScreen, read_only=True) as (tui, pilot, screen, actions):
        assert "READ-ONLY" in tui.sub_title
        active = {b.binding.action for b in screen.active_bindings.values()}
        assert "cancel" not in active and "requeue" not in active  # hidden from the footer
        before = statuses(db)
        for n, (key, eid) in enumerate((("c", facts.id("running")), ("e", facts.id("failed_recent"))), 1):
            await put_cursor(pilot, screen, eid)
            await pilot.press(key)
            await wait_for(
                pilot, lambda n=n: sum("read-only mode" in m for _, m in tui.notices) == n, what="the read-only refusal"
            )
            assert tui.screen is screen  # no confirmation opened
        # Even called directly (command palette, a bug), the action is refused.
        screen.act("cancel", screen.targets())
        await wait_for(
            pilot, lambda: sum("read-only mode" in m for _, m in tui.notices) == 3, what="the read-only refusal"
        )
        await actions_settled(pilot, screen)
        assert actions == []
        assert statuses(db) == before and rows(db, ACTIONS) == []


async def test_pages_of_a_long_history(dsn, db):
    bulk = seed_bulk_finished(db, PAGE_SIZE * 2 + 30, analyze=False)
    newest_first = list(range(bulk.last_id, bulk.first_id - 1, -1))
    async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
        assert screen.table.keys() == [str(i) for i in newest_first[:PAGE_SIZE]]
        for page in (1, 2):
            await pilot.press("right_square_bracket")
            await fresh(pilot, screen)
            assert screen.table.keys() == [str(i) for i in newest_first[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]]
        await pilot.press("right_square_bracket")  # no older page: stays
        assert any("no older executions" in m for _, m in tui.notices)
        await pilot.press("left_square_bracket", "left_square_bracket")
        await fresh(pilot, screen)
        assert screen.table.keys() == [str(i) for i in newest_first[:PAGE_SIZE]]
