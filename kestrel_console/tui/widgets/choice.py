"""Asks to pick one of a few choices (a bulk action): ``↑ ↓`` move, ``enter`` picks,
``escape`` gives up (dismisses with None)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ...safe_text import literal
from .prompt_box import prompt_box_css


class ChoiceModal(ModalScreen["str | None"]):
    DEFAULT_CSS = (
        prompt_box_css("ChoiceModal", "choice")
        + """
    ChoiceModal OptionList { margin-top: 1; height: auto; max-height: 8; }
    ChoiceModal #choice-keys { color: $text-muted; }
    """
    )

    BINDINGS = [Binding("escape", "give_up", "Cancel")]

    def __init__(self, title: str, prompt: str, choices: list[tuple[str, str]]) -> None:
        """``choices``: (id, what it says), in order; the first is highlighted."""
        super().__init__()
        self.title_text = title
        self.prompt = prompt
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(literal(self.title_text), id="choice-title")
            yield Static(literal(self.prompt, newlines=True), id="choice-prompt")
            yield OptionList(*(Option(literal(text), id=key) for key, text in self.choices), id="choice-list")
            yield Static("[b]↑ ↓[/b] choose    [b]enter[/b] continue    [b]esc[/b] cancel", id="choice-keys")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = 0
        self.set_focus(options)  # now: the keys typed next land here (keys.py)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_give_up(self) -> None:
        self.dismiss(None)
