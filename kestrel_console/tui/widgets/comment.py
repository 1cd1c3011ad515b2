"""Asks for one line of text (a decision's comment, a file name): ``enter`` accepts,
``escape`` gives up (dismisses with None)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from ...safe_text import literal
from .prompt_box import prompt_box_css


class CommentModal(ModalScreen[str | None]):
    DEFAULT_CSS = (
        prompt_box_css("CommentModal", "comment")
        + """
    CommentModal Input { margin-top: 1; }
    CommentModal #comment-keys { color: $text-muted; }
    """
    )

    BINDINGS = [Binding("escape", "give_up", "Cancel")]

    def __init__(self, title: str, prompt: str, *, placeholder: str = "", value: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.prompt = prompt
        self.placeholder = placeholder
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical():
            # Both may quote text from the database (a gate's id): shown literally.
            yield Static(literal(self.title_text), id="comment-title")
            yield Static(literal(self.prompt, newlines=True), id="comment-prompt")
            yield Input(value=self.value, placeholder=self.placeholder, id="comment-input")
            yield Static("[b]enter[/b] continue    [b]esc[/b] cancel", id="comment-keys")

    def on_mount(self) -> None:
        # Focused now, not by a callback that runs later: the keys typed right after the key
        # that opened this prompt wait for its mount (keys.py), then land here.
        for box in self.query(Input):
            self.set_focus(box)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())

    def action_give_up(self) -> None:
        self.dismiss(None)
