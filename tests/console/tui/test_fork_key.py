"""The fork key on the Execution screen (issue 47): `f` forks from the step selected in the
Attempts table after a reason and an optional new input (JSON, checked before anything is
asked), with a confirmation naming both ids; then "forked A → B" and a way to open B. The
engine's refusals (a step past a decided gate) and a live execution are one line each."""

from __future__ import annotations

from textual.widgets import Input

from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal
from kestrel_console.tui.widgets.json_input import JsonModal
from kestrel_console.tui.widgets.live_table import LiveTable
from tests.seed import SeedFacts, seed_history

from .helpers import (
    SIZE,
    actions_settled,
    console,
    footer_text,
    give_reason,
    on_detail,
    open_detail,
    rows,
    text_of,
    wait_for,
)

FORKS = "SELECT fork_id, origin_id, from_step FROM execution_forks ORDER BY fork_id"
AUDIT = (
    "SELECT actor, action, execution_id, step_id, comment, details->>'fork_id' FROM operator_actions"
    " WHERE action = 'fork'"
)


def seeded(db) -> SeedFacts:
    """The seeded history, its operation_outputs numbered as the engine numbers them (the
    seed leaves ``seq`` empty; a fork finds its step by it)."""
    facts = seed_history(db)
    db.execute(
        "UPDATE operation_outputs o SET seq = r.n FROM (SELECT execution_id, step_id,"
        " row_number() OVER (PARTITION BY execution_id ORDER BY created_at, step_id) AS n"
        " FROM operation_outputs) r WHERE (o.execution_id, o.step_id) = (r.execution_id, r.step_id)"
    )
    return facts


async def select_step(pilot, screen: DetailScreen, step: str) -> None:
    """Put the Attempts table's cursor on the first row of ``step``."""
    table = screen.query_one("#detail-attempts", LiveTable)
    keys = table.keys()
    table.move_cursor(row=next(i for i, k in enumerate(keys) if table.rows_data[k]["step_id"] == step))
    await pilot.pause()
    assert screen.selected_step() == step


async def test_f_forks_from_the_selected_step_with_new_input_and_opens_the_fork(dsn, db):
    facts = seeded(db)
    origin = facts.id("approved")
    async with on_detail(dsn, origin) as (tui, pilot, screen):
        await wait_for(pilot, lambda: "f Fork" in footer_text(tui), what="the fork key in the footer")
        await select_step(pilot, screen, "fix")
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(tui.screen, CommentModal))
        assert f"Reason to fork execution {origin} from step 'fix'" in text_of(tui.screen.query_one("#comment-prompt"))
        await give_reason(pilot, "fix deployed")
        await wait_for(pilot, lambda: isinstance(tui.screen, JsonModal))
        box = tui.screen.query_one(Input)
        assert box.value == '{"pod": "api-1"}'  # the origin's input, to edit
        await pilot.press("end", "ctrl+u", *'{"pod": api-9}', "enter")
        await wait_for(pilot, lambda: tui.screen.error != "", what="the JSON error")
        assert isinstance(tui.screen, JsonModal)  # still asking
        assert text_of(tui.screen.query_one("#json-error")) == "not JSON: Expecting value at column 9"
        await pilot.press("end", "ctrl+u", *'{"pod": "api-9"}', "enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal))
        question = tui.screen.question
        assert question.startswith(f"Fork execution {origin} from step 'fix' as a new execution?")
        assert 'Input: new: {"pod": "api-9"}' in question and "Comment: 'fix deployed'" in question
        await pilot.press("y")
        await wait_for(pilot, lambda: rows(db, FORKS) != [], what="the fork")
        [(fork, _, step)] = rows(db, FORKS)
        assert step == "fix"
        offered = f"Open execution {fork} now?"
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal) and offered in tui.screen.question)
        assert ("information", f"forked {origin} → {fork}") in tui.notices
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen) and tui.screen.execution_id == fork)
        await wait_for(pilot, lambda: tui.screen.execution is not None, what="the fork's screen")
        # The fork's screen links back to its origin; the origin's lists its fork.
        family = tui.screen.query_one("#detail-family", LiveTable)
        await wait_for(pilot, lambda: str(origin) in family.rows_data, what="the link to the origin")
    assert rows(db, "SELECT input, status FROM workflow_executions WHERE id = %s", (fork,)) == [
        ({"pod": "api-9"}, "enqueued")
    ]
    kept = rows(db, "SELECT step_id FROM operation_outputs WHERE execution_id = %s ORDER BY seq", (fork,))
    assert kept == [("rca",)]  # the steps before 'fix' keep their checkpoints; 'fix' and after run again
    assert rows(db, AUDIT) == [("tui-tester", "fork", origin, "fix", "fix deployed", str(fork))]


async def test_a_refused_fork_and_a_live_execution_are_one_line_each(dsn, db):
    facts = seeded(db)
    origin = facts.id("approved")
    async with on_detail(dsn, origin) as (tui, pilot, screen):
        await select_step(pilot, screen, "open-pr")  # after the decided gate 'approve-fix'
        await pilot.press("f")
        await give_reason(pilot)
        await wait_for(pilot, lambda: isinstance(tui.screen, JsonModal))
        await pilot.press("enter")  # the origin's input
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal))
        assert "Input: the origin's." in tui.screen.question
        await pilot.press("y")
        await actions_settled(pilot, screen)
        said = f"cannot fork: execution {origin} passed an approval gate before step 'open-pr'"
        await wait_for(pilot, lambda: ("warning", said) in tui.notices, what="the refusal")

        live = await open_detail(pilot, facts.id("enqueued"))
        await wait_for(pilot, lambda: "f Fork" not in footer_text(tui), what="the fork key hidden")
        await pilot.press("f")
        await wait_for(pilot, lambda: any("can be forked" in m for _, m in tui.notices))
        assert tui.screen is live
        [(_, line)] = [n for n in tui.notices if "can be forked" in n[1]]
        assert line.startswith(f"execution {facts.id('enqueued')} is enqueued: only a finished")
    assert rows(db, FORKS) == [] and rows(db, AUDIT) == []


async def test_read_only_hides_the_fork_key(dsn, db):
    facts = seed_history(db)
    tui = console(dsn, read_only=True)
    async with tui.run_test(size=SIZE) as pilot:
        await open_detail(pilot, facts.id("approved"))
        await pilot.press("f")
        await wait_for(pilot, lambda: any("read-only mode: fork refused" in m for _, m in tui.notices))
        assert "f Fork" not in footer_text(tui) and not isinstance(tui.screen, CommentModal)
