"""Asks for one line of text (a decision's comment, a file name): ``enter`` accepts,
``escape`` gives up (dismisses with None)."""

from __future__ import annotations

from textual.widget import Widget
from textual.widgets import Input

from .prompt_box import PromptModal, prompt_box_css


class CommentModal(PromptModal[str]):
    DEFAULT_CSS = (
        prompt_box_css("CommentModal", "comment")
        + """
    CommentModal Input { margin-top: 1; }
    CommentModal #comment-keys { color: $text-muted; }
    """
    )
    PREFIX = "comment"

    def __init__(self, title: str, prompt: str, *, placeholder: str = "", value: str = "") -> None:
        super().__init__(title, prompt)
        self.placeholder = placeholder
        self.value = value

    def answer_widgets(self) -> list[Widget]:
        return [Input(value=self.value, placeholder=self.placeholder, id="comment-input")]

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())
