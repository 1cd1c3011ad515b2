"""What the Queues and Schedules screens share: a list of named things that pause, read on
every refresh and keyed by name, a summary line above it, and ``h`` (hold) pausing or resuming
the one under the cursor after a y/n, through the operator API (audited)."""

from __future__ import annotations

from typing import Any, ClassVar

from .live import ScreenMixin
from .widgets.live_table import LiveTable


class PausableList(ScreenMixin):
    """Mixed into a screen whose main table lists rows with a ``name`` and a ``paused``."""

    # What a row is, as messages and the confirmation name it: "queue", "schedule".
    KIND: ClassVar[str] = ""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: list[dict[str, Any]] = []

    def cells(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` as the table shows it, by column."""
        raise NotImplementedError

    def summarize(self) -> None:
        """Say what the rows are on the summary line (after each refresh, and when the table
        is clipped or not any more)."""
        raise NotImplementedError

    def pause_question(self, row: dict[str, Any], pause: bool) -> str:
        """The y/n question before ``row`` is paused (``pause``) or resumed."""
        raise NotImplementedError

    def on_mount(self) -> None:
        self.table.focus()

    def show(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.table.sync((r["name"], self.cells(r), r) for r in rows)
        self.summarize()

    def paused_count(self) -> int:
        return sum(1 for r in self.rows if r["paused"])

    def counted(self) -> str:
        """How many rows, and how many of them paused: "3 queues · 1 paused"."""
        n, paused = len(self.rows), self.paused_count()
        return f"{n} {self.KIND}{'s' if n != 1 else ''}" + (f" · {paused} paused" if paused else "")

    def on_live_table_clipped(self, event: LiveTable.Clipped) -> None:
        self.summarize()

    def selected(self) -> dict[str, Any] | None:
        """The row under the cursor (None: the list is empty)."""
        return self.table.cursor_data()

    def action_toggle_paused(self) -> None:
        if self.pause_refused(self.KIND):
            return
        row = self.selected()
        if row is None:
            self.kapp.tell(f"no {self.KIND} selected", severity="warning")
            return
        pause = not row["paused"]
        self.confirm_pause(self.KIND, row["name"], pause, self.pause_question(row, pause))
