"""Keys go where the operator is typing, in the order typed.

Textual hands a key to the focused widget's message queue and decides its binding only once the
key has bubbled back up to the app, against the focus of that later moment. Keys typed in one
burst are all handed out before the first one's binding runs: ``/ec`` on Executions sent ``e``
and ``c`` to the list (re-enqueue, cancel) while ``/`` was still on its way to opening the
filter box, whose focus arrived later still; a prompt pushed by one key received the next keys
before its input existed (``NoMatches`` in its ``on_mount``), or ``2`` switched screens under it.

``KeyRouter.route`` decides each key in the app's own task, one at a time, in the order typed:
while the top screen is still being composed, keys wait for it; a focused text widget (Input,
TextArea) gets its printable keys inserted at once, by its own key handler; any other key runs
its binding at once (the focused widget's, up through its screen's to the app's), and a key
that ran one waits, briefly, until the messages it set off (a row opened, a filter applied)
have been handled, and the keys after it wait behind what those asked the app to do next, so
the next key meets the screen that the operator saw coming. A yes/no question takes only the
keys typed after it was asked (``shown_at``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from textual import _time, events
from textual.screen import Screen
from textual.widgets import Input, TextArea

# How long a key that ran a binding waits for the messages it set off (a handler that waits on
# the app itself would otherwise hold the keys forever): a bound, not a sleep.
SETTLE_MAX_S = 0.5
# How long keys wait for a screen to be composed, at most.
HELD_MAX_S = 5.0
# A key this router has decided: when it bubbles back to the app, its bindings are not run again.
ROUTED = "_kestrel_routed"


def now() -> float:
    """The clock of a key's ``time``: a question shown at ``now()`` ignores keys typed before."""
    return _time.get_time()


def typing_target(screen: Screen) -> Input | TextArea | None:
    """The text widget the operator types into on ``screen`` now, if any."""
    focused = screen.focused
    if isinstance(focused, (Input, TextArea)) and not getattr(focused, "read_only", False):
        return focused
    return None


class KeyRouter:
    """Holds the keys typed and decides them one by one (see the module's docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.typed: deque[events.Key] = deque()
        self.held = False  # keys wait for a screen being composed: new keys queue behind them

    async def take(self, event: events.Key) -> None:
        """A key from the terminal: decide it after every key typed before it."""
        self.typed.append(event)
        if not self.held:
            await self.drain()

    async def drain(self) -> None:
        while self.typed:
            screen = self.app.screen
            if not screen.is_mounted:  # composing: its inputs and focus are not there yet
                self.held = True
                self._resume_when_mounted(screen)
                return
            if await self.route(self.typed.popleft()):
                # A binding ran: what it asked the app to do later (a screen switched to from a
                # handler) is in the app's queue now; the next keys, typed or still in the
                # queue ahead of it, wait behind it.
                self.held = True
                self.app.call_later(self._resume)
                return

    def _resume_when_mounted(self, screen: Screen) -> None:
        async def resume() -> None:
            try:  # a screen dropped before it mounted must not hold the keys for ever
                await asyncio.wait_for(screen._mounted_event.wait(), HELD_MAX_S)
            except TimeoutError:
                pass
            self.app.call_later(self._resume)

        asyncio.get_running_loop().create_task(resume(), name="kestrel-keys-held")

    async def _resume(self) -> None:
        self.held = False
        if self.typed:
            await self.drain()

    async def route(self, event: events.Key) -> bool:
        """Decide one key; True if it ran a binding."""
        app = self.app
        screen = app.screen
        shown_at = getattr(screen, "shown_at", None)
        if shown_at is not None and event.time < shown_at:
            # A question answers only keys typed once it was there: a ``y`` typed ahead, for
            # the prompt before it, must not say yes to what the operator has not read.
            screen.keys_ignored = getattr(screen, "keys_ignored", 0) + 1
            return False
        setattr(event, ROUTED, True)
        target = typing_target(screen)
        if await app._check_bindings(event.key, priority=True):
            await self.settle([])
            return True
        if target is not None:
            # The widget's own key handler first, as Textual runs it: a printable key is inserted
            # now, before any later key is looked at.
            await target._on_key(event)
            if event._stop_propagation:
                return False
        chain = [node for node, _ in screen._modal_binding_chain]
        if await app._check_bindings(event.key):
            await self.settle(chain)
            return True
        (screen.focused or screen)._forward_event(event)
        return False

    async def settle(self, chain: list[Any]) -> None:
        """Wait until every message queued on the widgets of the key's binding chain (widget
        first, then its parents up to its screen) and on the screen on top now has been
        handled: what the binding set off (RowSelected, Input.Submitted) has happened."""
        deadline = time.monotonic() + SETTLE_MAX_S
        nodes = [n for n in chain if n is not self.app] + [self.app.screen]
        for node in nodes:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if not node.is_attached or node._closing or node._closed:
                continue
            done = asyncio.Event()
            if not node.call_later(done.set):
                continue
            try:
                await asyncio.wait_for(done.wait(), remaining)
            except TimeoutError:
                return
