"""The bulk key on the Executions list (issue 47): `b` on a filtered list asks which action and
why, freezes the ids the filter selects now (the exact count, their statuses, a sample, the
token) in a confirmation, and on `y` acts on exactly those ids: an execution that matches the
filter only after the preview is left alone, a row whose state changed meanwhile is refused
and reported with its reason, the summary says how many were done and refused."""

from __future__ import annotations

from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.widgets.choice import ChoiceModal
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal

from .helpers import actions_settled, fresh, on_screen, rows, statuses, wait_for

BULK_AUDIT = (
    "SELECT action, execution_id, comment, batch_id IS NOT NULL FROM operator_actions"
    " WHERE actor = 'tui-tester' ORDER BY id"
)


async def filter_list(pilot, screen: ExecutionsScreen, text: str) -> None:
    await pilot.press("slash", *text, "enter")
    await wait_for(pilot, lambda: str(screen.filter) == text, what="the filter")
    await fresh(pilot, screen)


async def test_b_previews_the_filter_exactly_then_acts_on_those_ids_only(dsn, db, app):
    ids = app.enqueue_many("pay", [{"n": i} for i in range(5)])
    other = app.enqueue("other", None)
    db.execute("UPDATE workflow_executions SET status = 'success', finished_at = now() WHERE id = %s", (ids[0],))
    async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
        await filter_list(pilot, screen, "workflow:pay")
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(tui.screen, ChoiceModal))
        await pilot.press("enter")  # the first: cancel
        await wait_for(pilot, lambda: isinstance(tui.screen, CommentModal))
        await pilot.press(*"INC-7", "enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal), what="the preview")
        lines = tui.screen.question.splitlines()
        assert lines[0] == "Cancel 5 executions selected by workflow:pay?"
        assert lines[1] == "Now: enqueued 4, success 1."
        assert lines[2] == "Ids (newest first): " + ", ".join(str(i) for i in reversed(ids))
        assert "Cancel acts on enqueued, running or waiting executions" in lines[3]
        assert "exactly these 5 ids, never the filter evaluated again" in lines[4] and "'INC-7'" in lines[4]
        assert tui.screen.title_text == "Bulk cancel: 5 executions"
        # While the question is on screen: a new execution matches the filter, another one ends.
        late = app.enqueue("pay", {"n": 99})
        db.execute("UPDATE workflow_executions SET status = 'error', finished_at = now() WHERE id = %s", (ids[1],))
        shown: list[str] = []  # every line the progress line showed
        real = screen._show_bulk
        screen._show_bulk = lambda line: (shown.append(line), real(line))  # type: ignore[method-assign]
        await pilot.press("y")
        await wait_for(pilot, lambda: "3 cancelled, 2 refused, 0 left (of 5)" in screen.bulk_line, what="the result")
        await actions_settled(pilot, screen)
        assert [line.split(": ", 1)[1] for line in shown] == [
            "starting on 5 executions…", "5 of 5 (cancelled 3, refused 2)", "3 cancelled, 2 refused, 0 left (of 5)",
        ]  # fmt: skip
        said = [m for _, m in tui.notices if m.startswith("cancel b")]
        assert said and said[-1].splitlines()[1:] == [
            f"refused 1: cannot cancel: execution # already finished (error) (e.g. {ids[1]})",
            f"refused 1: cannot cancel: execution # already finished (success) (e.g. {ids[0]})",
        ]
    now = statuses(db)
    assert [now[i] for i in ids] == ["success", "error", "cancelled", "cancelled", "cancelled"]
    assert now[late] == "enqueued" and now[other] == "enqueued"
    assert rows(db, BULK_AUDIT) == [("bulk", None, None, False)] + [("cancel", i, "INC-7", True) for i in ids[2:]]


async def test_no_acts_on_nothing_and_an_unfiltered_list_is_refused(dsn, db, app):
    ids = app.enqueue_many("pay", [{"n": i} for i in range(3)])
    async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
        await pilot.press("b")
        await wait_for(pilot, lambda: any("apply a filter first" in m for _, m in tui.notices))
        assert tui.screen is screen
        await filter_list(pilot, screen, "status:enqueued")
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(tui.screen, ChoiceModal))
        await pilot.press("down", "down", "enter")  # pause
        await wait_for(pilot, lambda: isinstance(tui.screen, CommentModal))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal), what="the preview")
        assert tui.screen.question.startswith("Pause 3 executions selected by status:enqueued?")
        await pilot.press("n")
        await actions_settled(pilot, screen)
        assert any(m.startswith("nothing done: the preview b") for _, m in tui.notices)
    assert set(statuses(db).values()) == {"enqueued"} and len(ids) == 3
    assert rows(db, "SELECT action FROM operator_actions") == [("bulk",)]  # the preview, audited; nothing else


async def test_read_only_refuses_the_bulk_key(dsn, app):
    app.enqueue("pay", None)
    async with on_screen(dsn, "2", ExecutionsScreen, read_only=True) as (tui, pilot, screen):
        await filter_list(pilot, screen, "workflow:pay")
        await pilot.press("b")
        await wait_for(pilot, lambda: any("read-only mode: bulk action refused" in m for _, m in tui.notices))
        assert tui.screen is screen
