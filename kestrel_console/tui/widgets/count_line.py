"""One "status count" line of the dashboard that opens the list it counts: focusable (tab),
``enter`` or a click asks for the Executions list filtered by its status."""

from __future__ import annotations

from typing import Any, ClassVar

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static


class CountLine(Static, can_focus=True):
    DEFAULT_CSS = """
    CountLine:focus { background: $accent 40%; }
    """
    BINDINGS: ClassVar[list[Any]] = [Binding("enter", "open", "Open the list", show=False)]

    class Open(Message):
        """Show the executions in ``status``."""

        def __init__(self, status: str) -> None:
            super().__init__()
            self.status = status

    def __init__(self, status: str, **kwargs: Any) -> None:
        super().__init__(status, **kwargs)
        self.status = status

    def action_open(self) -> None:
        self.post_message(self.Open(self.status))

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.action_open()
