"""Asks to pick one of a few choices (a bulk action): ``↑ ↓`` move, ``enter`` picks,
``escape`` gives up (dismisses with None)."""

from __future__ import annotations

from textual.widget import Widget
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ...safe_text import literal
from .prompt_box import PromptModal, prompt_box_css


class ChoiceModal(PromptModal[str]):
    DEFAULT_CSS = (
        prompt_box_css("ChoiceModal", "choice")
        + """
    ChoiceModal OptionList { margin-top: 1; height: auto; max-height: 8; }
    ChoiceModal #choice-keys { color: $text-muted; }
    """
    )
    PREFIX = "choice"
    KEYS = "[b]↑ ↓[/b] choose    [b]enter[/b] continue    [b]esc[/b] cancel"

    def __init__(self, title: str, prompt: str, choices: list[tuple[str, str]]) -> None:
        """``choices``: (id, what it says), in order; the first is highlighted."""
        super().__init__(title, prompt)
        self.choices = choices

    def answer_widgets(self) -> list[Widget]:
        return [OptionList(*(Option(literal(text), id=key) for key, text in self.choices), id="choice-list")]

    def on_mount(self) -> None:
        self.query_one(OptionList).highlighted = 0  # then PromptModal focuses it

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)
