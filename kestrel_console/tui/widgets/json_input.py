"""Asks for a JSON value on one line (a fork's new input, an event's payload): ``enter``
accepts once it parses, else one line under the box says what is wrong and where, and the
prompt stays; ``escape`` gives up (dismisses with None). An empty line is ``JsonAnswer(False)``
when the prompt allows it (``empty_means``: what empty does, said in the prompt)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from textual.widget import Widget
from textual.widgets import Input, Static

from ...safe_text import literal
from .prompt_box import PromptModal, prompt_box_css


@dataclass(frozen=True)
class JsonAnswer:
    """What was typed: ``given`` False for an empty line (the prompt's default), else ``value``."""

    given: bool
    value: Any = None


def parse_json(text: str) -> Any:
    """``text`` as JSON; ValueError saying, in one line, what is wrong and at which column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from None


class JsonModal(PromptModal[JsonAnswer]):
    DEFAULT_CSS = (
        prompt_box_css("JsonModal", "json")
        + """
    JsonModal Input { margin-top: 1; }
    JsonModal #json-error { color: $error; }
    JsonModal #json-keys { color: $text-muted; }
    """
    )

    PREFIX = "json"

    def __init__(self, title: str, prompt: str, *, value: str = "", empty_means: str | None = None) -> None:
        super().__init__(title, prompt if empty_means is None else f"{prompt}\nEmpty: {empty_means}.")
        self.value = value
        self.empty_allowed = empty_means is not None
        self.error = ""  # what the last enter found wrong (tests read it)

    def answer_widgets(self) -> list[Widget]:
        return [Input(value=self.value, placeholder='{"key": "value"}', id="json-input"), Static("", id="json-error")]

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text and self.empty_allowed:
            self.dismiss(JsonAnswer(False))
            return
        try:
            value = parse_json(text)
        except ValueError as exc:
            self.error = str(exc)
            self.query_one("#json-error", Static).update(literal(self.error))
            return
        self.dismiss(JsonAnswer(True, value))
