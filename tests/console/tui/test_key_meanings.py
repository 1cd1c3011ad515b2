"""One meaning per key across screens (issue 20, defect 6): ``p`` paused a production queue on
the Queues screen and paused the refresh everywhere else; ``space`` paused the refresh on the
dashboard and marked a row on the lists."""

from __future__ import annotations

import pytest
from textual.binding import Binding

from kestrel_console.tui import KestrelConsole
from kestrel_console.tui.operator import ACTIONS, WRITES
from kestrel_console.tui.registry import SCREENS
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.queues import QueuesScreen
from kestrel_console.tui.widgets.confirm import ConfirmModal

from .helpers import actions_settled, on_screen, record_pauses, rows, wait_for
from .test_queues import PAUSED, seed_queues

# What changes the world: an operator action, a fork, a bulk action, an event sent, a schedule
# triggered, or pausing production.
DESTRUCTIVE = set(ACTIONS) | set(WRITES) | {"toggle_paused"}  # toggle_paused: a queue or a schedule


def meanings() -> dict[str, set[str]]:
    """key -> every action it is bound to, on the app and on each screen."""
    out: dict[str, set[str]] = {}
    classes = [KestrelConsole] + [entry.screen for entry in SCREENS] + [DetailScreen]
    for cls in classes:
        for binding in Binding.make_bindings(cls.BINDINGS):
            for key in binding.key.split(","):
                out.setdefault(key.strip(), set()).add(binding.action)
    return out


def test_a_destructive_key_means_nothing_else_and_the_app_keys_are_never_rebound():
    keys = meanings()
    app_keys = {k.strip() for b in Binding.make_bindings(KestrelConsole.BINDINGS) for k in b.key.split(",")}
    for key, actions in keys.items():
        if actions & DESTRUCTIVE:
            assert len(actions) == 1, f"{key!r} means {sorted(actions)}"
        if key in app_keys:
            assert len(actions) == 1, f"the app's key {key!r} is rebound: {sorted(actions)}"
    assert keys["space"] == {"mark"}


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_p_on_the_queues_screen_pauses_the_refresh_not_the_queue(dsn, db, size):
    seed_queues(dsn)
    async with on_screen(dsn, "6", QueuesScreen, size=size) as (tui, pilot, screen):
        asked = record_pauses(tui)
        await pilot.press("p")
        await wait_for(pilot, lambda: tui.paused, what="the refresh to pause")
        await actions_settled(pilot, screen)
        assert not isinstance(tui.screen, ConfirmModal) and asked == []
        assert rows(db, PAUSED) == [("bulk", False, None), ("emails", False, None)]
        await pilot.press("p")
        assert not tui.paused
        await pilot.press("h")  # the queue's own key asks first
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal), what="the confirmation")
        await pilot.press("n")
        await actions_settled(pilot, screen)
        assert asked == []
