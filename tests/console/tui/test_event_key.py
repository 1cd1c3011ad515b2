"""The send-event key on the Executions list (issue 47): `v` asks for the key, then the payload
as JSON (a line that is not JSON is said and asked again), confirms, and sends it: the waiting
execution resumes with the payload; the event records who sent it."""

from __future__ import annotations

from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal
from kestrel_console.tui.widgets.json_input import JsonModal
from tests.seed import awaiting_payment
from tests.waiting import wait_for as wait_until

from .helpers import actions_settled, on_screen, rows, wait_for


async def test_v_sends_an_event_and_the_waiting_execution_resumes(dsn, db):
    with awaiting_payment(dsn) as (app, eid):
        async with on_screen(dsn, "2", ExecutionsScreen) as (tui, pilot, screen):
            await pilot.press("v")
            await wait_for(pilot, lambda: isinstance(tui.screen, CommentModal))
            await pilot.press(*"payment:A-17", "enter")
            await wait_for(pilot, lambda: isinstance(tui.screen, JsonModal))
            await pilot.press(*"{amount: 30}", "enter")
            await wait_for(pilot, lambda: tui.screen.error.startswith("not JSON: "), what="the JSON error")
            await pilot.press("ctrl+u", *'{"amount": 30}', "enter")
            await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal))
            assert tui.screen.question.startswith("Send event 'payment:A-17' with payload {\"amount\": 30}?")
            await pilot.press("y")
            await actions_settled(pilot, screen)
            await wait_for(pilot, lambda: any(m.startswith("sent event 'payment:A-17'") for _, m in tui.notices))
        wait_until(lambda: app.get(eid).done)
        assert app.get(eid).output == {"amount": 30}
        assert rows(db, "SELECT key, payload, sent_by FROM workflow_events") == [
            ("payment:A-17", {"amount": 30}, "tui-tester")
        ]
