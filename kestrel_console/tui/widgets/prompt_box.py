"""The box every prompt (a modal asking one thing) is drawn in: centred, 80% wide up to 100
columns, a thick border in the prompt's colour, and its title in that colour; and what the
prompts that ask for an answer share (``PromptModal``)."""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

from ...safe_text import literal

AnswerT = TypeVar("AnswerT")


def prompt_box_css(screen: str, prefix: str, colour: str = "$accent") -> str:
    """CSS for ``screen`` (its class name): the box, and the title ``#<prefix>-title``."""
    return f"""
    {screen} {{ align: center middle; }}
    {screen} > Vertical {{
        width: 80%;
        max-width: 100;
        height: auto;
        border: thick {colour};
        background: $surface;
        padding: 1 2;
    }}
    {screen} #{prefix}-title {{ text-style: bold; color: {colour}; }}
    """


class PromptModal(ModalScreen[AnswerT | None], Generic[AnswerT]):
    """A title, a question, the widget that takes the answer (focused as soon as the prompt
    is), and the keys: ``escape`` gives up (dismisses with None). The ids are ``#<PREFIX>-title``,
    ``-prompt`` and ``-keys``."""

    PREFIX: ClassVar[str]
    KEYS: ClassVar[str] = "[b]enter[/b] continue    [b]esc[/b] cancel"
    BINDINGS = [Binding("escape", "give_up", "Cancel")]

    def __init__(self, title: str, prompt: str) -> None:
        super().__init__()
        self.title_text = title
        self.prompt = prompt

    def answer_widgets(self) -> list[Widget]:
        """What takes the answer (the first is focused), and what is shown under it."""
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        answer = self.answer_widgets()
        self.answer = answer[0]
        with Vertical():
            # Both may quote text from the database (a gate's id): shown literally.
            yield Static(literal(self.title_text), id=f"{self.PREFIX}-title")
            yield Static(literal(self.prompt, newlines=True), id=f"{self.PREFIX}-prompt")
            yield from answer
            yield Static(self.KEYS, id=f"{self.PREFIX}-keys")

    def on_mount(self) -> None:
        # Focused now, not by a callback that runs later: the keys typed right after the key
        # that opened this prompt wait for its mount (keys.py), then land here.
        self.set_focus(self.answer)

    def action_give_up(self) -> None:
        self.dismiss(None)
