"""A yes/no question before anything changes: ``y`` does it, ``n``, ``escape`` or ``q`` (back,
as everywhere) does not."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from ...safe_text import literal, visible
from ..keys import now
from .prompt_box import prompt_box_css


class ConfirmModal(ModalScreen[bool]):
    """Dismisses with True only on ``y``."""

    DEFAULT_CSS = (
        prompt_box_css("ConfirmModal", "confirm", "$warning")
        + """
    ConfirmModal #confirm-keys { margin-top: 1; color: $text-muted; }
    """
    )

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape,q", "answer(False)", "No"),
    ]

    def __init__(self, question: str, *, title: str = "Confirm") -> None:
        super().__init__()
        # Both may quote names from the database (a queue, a schedule, its workflow and cron):
        # shown as escapes, and never read as markup.
        self.question = visible(question, newlines=True)
        self.title_text = visible(title)
        # Keys typed before the question was asked (ahead of it, meant for the prompt before
        # it) never answer it (keys.py).
        self.shown_at = now()
        self.keys_ignored = 0

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(literal(self.title_text), id="confirm-title")
            yield Static(literal(self.question, newlines=True), id="confirm-question")
            yield Static("[b]y[/b] yes    [b]n[/b] / [b]esc[/b] no", id="confirm-keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
