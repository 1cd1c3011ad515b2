"""Approvals: pending gates with their details; `a`/`x` ask for a comment and a confirmation,
then decide exactly the chosen gates through kestrel_core, audited under the operator's name."""

from __future__ import annotations

from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal
from tests.seed import seed_history

from .helpers import (
    ACTIONS,
    OPERATOR,
    WAIT_OF,
    acting_on,
    actions_settled,
    on_screen,
    rows,
    statuses,
    text_of,
    wait_for,
)


async def decide(pilot, key: str, comment: str, answer: str = "y") -> str:
    """Press a/x, type the comment, confirm (or not); returns the question asked."""
    tui = pilot.app
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(tui.screen, CommentModal))
    if comment:
        await pilot.press(*comment)
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal))
    question = tui.screen.question
    await pilot.press(answer)
    return question


async def test_pending_gates_and_details(dsn, db):
    facts = seed_history(db)
    async with on_screen(dsn, "3", ApprovalsScreen) as (tui, pilot, screen):
        pending = facts.pending_approvals()
        assert screen.table.keys() == [f"{w.execution_id}:{w.step_id}" for w in pending]
        oldest = pending[0]
        key = f"{oldest.execution_id}:{oldest.step_id}"
        assert screen.table.shown(key, "workflow") == "remediate"
        assert screen.table.shown(key, "deadline") == "none"
        assert "failover db-1" in screen.table.shown(key, "details")
        assert "failover db-1" in str(screen.query_one("#appr-details").content.renderables[1].code)
        assert text_of(screen.query_one("#appr-summary")).startswith("2 approval gates waiting")


async def test_approve_and_reject_through_keys(dsn, db):
    facts = seed_history(db)
    async with acting_on(dsn, "3", ApprovalsScreen) as (tui, pilot, screen, actions):
        old, new = facts.pending_approvals()
        before = statuses(db)

        # `n` at the confirmation: nothing happens.
        await decide(pilot, "a", "no", answer="n")
        await actions_settled(pilot, screen)
        assert actions == []
        assert rows(db, WAIT_OF, (old.execution_id, old.step_id)) == [(None, None, None, False)]
        assert rows(db, ACTIONS) == []

        question = await decide(pilot, "a", "lgtm")  # the cursor is on the oldest gate
        assert question.startswith(f"Approve gate 'approve-fix' of execution {old.execution_id} (remediate)?")
        assert "Comment: 'lgtm'" in question and f"Recorded as {OPERATOR!r}" in question
        await wait_for(pilot, lambda: rows(db, WAIT_OF, (old.execution_id, old.step_id))[0][0] == "approved")
        assert rows(db, WAIT_OF, (old.execution_id, old.step_id)) == [("approved", OPERATOR, "lgtm", True)]
        assert rows(db, WAIT_OF, (new.execution_id, new.step_id)) == [(None, None, None, False)]
        assert rows(db, ACTIONS) == [(OPERATOR, "approve", old.execution_id, "approve-fix", "lgtm", "waiting")]
        after = statuses(db)
        assert after[old.execution_id] == "enqueued"
        assert {i: s for i, s in after.items() if i != old.execution_id} == {
            i: s for i, s in before.items() if i != old.execution_id
        }

        await wait_for(pilot, lambda: screen.table.keys() == [f"{new.execution_id}:{new.step_id}"])
        await decide(pilot, "x", "too risky")
        await wait_for(pilot, lambda: rows(db, WAIT_OF, (new.execution_id, new.step_id))[0][0] == "rejected")
        assert rows(db, WAIT_OF, (new.execution_id, new.step_id)) == [("rejected", OPERATOR, "too risky", True)]
        assert rows(db, ACTIONS)[-1] == (OPERATOR, "reject", new.execution_id, "approve-fix", "too risky", "waiting")
        await wait_for(pilot, lambda: screen.table.keys() == [])


async def test_mark_both_and_approve_all(dsn, db):
    facts = seed_history(db)
    async with on_screen(dsn, "3", ApprovalsScreen) as (tui, pilot, screen):
        await pilot.press("space", "space")  # marks a row and moves down
        assert len(screen.table.marks) == 2
        question = await decide(pilot, "a", "")
        assert question.startswith("Approve 2 approval gates?")
        pending = facts.pending_approvals()
        await wait_for(pilot, lambda: len(rows(db, ACTIONS)) == 2, what="two decisions")
        for w in pending:
            assert rows(db, WAIT_OF, (w.execution_id, w.step_id)) == [("approved", OPERATOR, None, True)]


async def test_read_only_refuses_decisions(dsn, db):
    facts = seed_history(db)
    async with acting_on(dsn, "3", ApprovalsScreen, read_only=True) as (tui, pilot, screen, actions):
        for n, key in enumerate(("a", "x"), 1):
            await pilot.press(key)
            await wait_for(
                pilot, lambda n=n: sum("read-only mode" in m for _, m in tui.notices) == n, what="the read-only refusal"
            )
            assert tui.screen is screen
        await actions_settled(pilot, screen)
        assert actions == []
        for w in facts.pending_approvals():
            assert rows(db, WAIT_OF, (w.execution_id, w.step_id)) == [(None, None, None, False)]
        assert rows(db, ACTIONS) == []
