"""The box under a list that shows the row under the cursor whole (what its cells cut): a
titled, scrolling frame around one text, redrawn when the cursor moves or the rows change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from .live_table import LiveTable


class DetailsBox(VerticalScroll):
    """``id``: the frame's (its screen's stylesheet sets its least height); ``body_id``: the
    text's."""

    DEFAULT_CSS = """
    DetailsBox { height: 1fr; border: round $accent; padding: 0 1; }
    """

    def __init__(self, title: str, *, id: str, body_id: str) -> None:
        super().__init__(id=id)
        self.border_title = title
        self.body_id = body_id

    def compose(self) -> ComposeResult:
        yield Static("", id=self.body_id)

    def show_cursor_row(
        self, table: LiveTable, describe: Callable[[dict[str, Any]], RenderableType], nothing: str
    ) -> None:
        """Show ``describe`` of the row under ``table``'s cursor, else ``nothing`` (dimmed)."""
        row = table.cursor_data()
        body = self.query_one(f"#{self.body_id}", Static)
        body.update(Text(nothing, style="dim") if row is None else describe(row))
