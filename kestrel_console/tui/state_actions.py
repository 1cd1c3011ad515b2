"""The four keys that change an execution's state (requeue, cancel, pause, resume), the same
on every screen that lists or shows executions: each acts on the screen's ``targets()`` (the
chosen rows, or the execution shown) through ``LiveScreen.act``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.binding import Binding

from .live import HOLD_KEY, LET_GO_KEY, ScreenMixin

if TYPE_CHECKING:
    from .operator import Target


# The four keys, in the order every such screen's footer shows them (spliced into its BINDINGS).
STATE_BINDINGS = [
    Binding("e", "requeue", "Re-enqueue"),
    Binding("c", "cancel", "Cancel"),
    Binding(HOLD_KEY, "pause", "Pause"),
    Binding(LET_GO_KEY, "resume", "Resume"),
]


class StateActions(ScreenMixin):
    if TYPE_CHECKING:

        def targets(self) -> list[Target]: ...

    def action_requeue(self) -> None:
        self.act("requeue", self.targets())

    def action_cancel(self) -> None:
        self.act("cancel", self.targets())

    def action_pause(self) -> None:
        self.act("pause", self.targets())

    def action_resume(self) -> None:
        self.act("resume", self.targets())
