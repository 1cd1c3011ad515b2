"""Execution detail: the trace shows every step in order with its attempts and the waits
between them; input/output/error; why it is not running, with the key that fixes it."""

from __future__ import annotations

from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal
from kestrel_console.tui.widgets.live_table import LiveTable
from kestrel_console.tui.widgets.timeline import Timeline
from tests.seed import cancelled_mid_step, seed_history

from .helpers import (
    ACTIONS,
    OPERATOR,
    SIZE,
    WAIT_OF,
    console,
    give_reason,
    on_detail,
    open_detail,
    rows,
    statuses,
    text_of,
    wait_for,
)


async def test_timeline_shows_every_step_in_order_with_attempts(dsn, db):
    facts = seed_history(db)
    eid = facts.id("approved")
    async with on_detail(dsn, eid) as (tui, pilot, screen):
        # Expected: every attempt and wait of the execution, by start time.
        entries = sorted(
            [("step", a.step_id, a.attempt, a.started_at, a.outcome) for a in facts.attempts_of("approved")]
            + [(w.kind, w.step_id, None, w.created_at, w.decision or "woke") for w in facts.waits_of("approved")],
            key=lambda e: e[3],
        )
        lanes_expected: list[str] = []
        for _, step_id, *_ in entries:
            if step_id not in lanes_expected:
                lanes_expected.append(step_id)
        assert lanes_expected == ["rca", "fix", "approve-fix", "cool-down", "open-pr"]

        timeline = screen.query_one(Timeline)
        assert [lane.step_id for lane in timeline.lanes] == lanes_expected
        fix = next(lane for lane in timeline.lanes if lane.step_id == "fix")
        assert [(s.attempt, s.outcome) for s in fix.segments] == [
            (a.attempt, a.outcome) for a in facts.attempts_of("approved", "fix")
        ]
        assert (fix.attempts, fix.failed) == (3, 2)
        kinds = {lane.step_id: lane.kind for lane in timeline.lanes}
        assert kinds["approve-fix"] == "approval" and kinds["cool-down"] == "sleep"

        # What is drawn: the axis, the overview, then one line per lane in that order.
        lines = [line.plain for line in timeline.lines(140)]
        assert lines[1].startswith("execution")
        labels = [line.split("│")[0].strip() for line in lines[2:]]
        assert labels == ["rca", "fix", "◇ approve-fix", "☾ cool-down", "open-pr"]
        fix_line = lines[2 + lanes_expected.index("fix")]
        assert "3 attempts, 2 failed" in fix_line and "·" in fix_line  # the backoff between tries
        assert "approval: approved by alice" in lines[2 + lanes_expected.index("approve-fix")]
        assert "approval" in lines[1] or "sleep" in lines[1] or "╌" in lines[1]  # waits are labelled gaps

        # The attempts table lists each attempt and wait, in start order.
        table = screen.query_one("#detail-attempts", LiveTable)
        shown = [
            (table.shown(k, "kind"), table.shown(k, "step"), table.shown(k, "attempt"), table.shown(k, "outcome"))
            for k in table.keys()
        ]
        assert shown == [
            (kind, step, str(attempt) if attempt else "", outcome) for kind, step, attempt, _, outcome in entries
        ]
        assert table.shown(table.keys()[1], "error") == "TimeoutError: kubectl timed out"

        assert "api-1" in screen.query_one("#detail-input").content.code
        assert '"pr": 101' in screen.query_one("#detail-output").content.code
        assert f"execution {eid}" in text_of(screen.query_one("#detail-head"))
        assert not screen.query_one("#detail-blocker").display  # finished: nothing blocks it


async def test_why_is_it_not_running(dsn, db):
    facts = seed_history(db)
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        cases = {
            "pending_approval": "it waits for approval 'approve-fix' since",
            "stuck": "re-enqueue it now (e)",
            "delayed": "it is scheduled for later",
            "sleeping": "it sleeps ('cool-down') until",
        }
        for label, expected in cases.items():
            screen = await open_detail(pilot, facts.id(label))
            blocker = screen.query_one("#detail-blocker")
            assert blocker.display
            text = text_of(blocker)
            assert text.startswith("Why isn't it running?") and expected in text, (label, text)
            await pilot.press("q")
        screen = await open_detail(pilot, facts.id("failed_recent"))
        assert "PermissionError: forbidden" in text_of(screen.query_one("#detail-error"))


async def test_approve_and_requeue_from_the_detail(dsn, db):
    facts = seed_history(db)
    eid = facts.id("pending_approval")
    async with on_detail(dsn, eid) as (tui, pilot, screen):
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(tui.screen, CommentModal))
        await pilot.press(*"ship it", "enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: rows(db, WAIT_OF, (eid, "approve-fix"))[0][0] == "approved")
        assert rows(db, ACTIONS) == [(OPERATOR, "approve", eid, "approve-fix", "ship it", "waiting")]

        stuck = facts.id("stuck")
        await pilot.press("q")
        screen = await open_detail(pilot, stuck)
        await pilot.press("e")
        await give_reason(pilot)
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal))
        assert f"Re-enqueue execution {stuck} (billing-sync), now running?" in tui.screen.question
        await pilot.press("y")
        await wait_for(pilot, lambda: statuses(db)[stuck] == "enqueued")
        assert rows(db, ACTIONS)[-1] == (OPERATOR, "requeue", stuck, None, None, "running")
        await wait_for(pilot, lambda: screen.execution and screen.execution["status"] == "enqueued")

        # `a` where no gate waits: said, nothing changes.
        await pilot.press("a")
        await wait_for(pilot, lambda: any("no approval gate waiting" in m for _, m in tui.notices), what="the notice")
        assert tui.screen is screen


async def test_a_cancelled_executions_running_step_is_closed_at_the_cancel(app, dsn, db):
    eid = cancelled_mid_step(app, db)
    async with on_detail(dsn, eid) as (tui, pilot, screen):
        timeline = screen.query_one(Timeline)
        await wait_for(
            pilot, lambda: any(lane.step_id == "rollout" for lane in timeline.lanes), what="the rollout lane"
        )
        rollout = next(lane for lane in timeline.lanes if lane.step_id == "rollout")
        assert [(s.outcome, s.end is not None) for s in rollout.segments] == [("cancelled", True)]
        line = next(line.plain for line in timeline.lines(140) if line.plain.startswith("rollout"))
        assert "cancelled" in line and "running" not in line
