"""``:`` on a list screen, as in k9s: type an execution's id, ``enter`` opens it (its detail
says so when there is no such execution), ``esc`` gives up. Keys typed right after ``:``, before
the id field has the focus, are still the id's: the prompt takes them itself."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static, TextArea

# The key, for the screens that offer it (shown in their help, not in the footer). A priority
# binding, handled as it arrives: the prompt is open before the keys typed after ``:`` are
# handed out, so they reach it, not the list's action keys. Typed into a text field, ``:`` is
# text (re-sent to that field, behind the keys it still has to take).
GOTO_BINDING = Binding("colon", "goto_execution", "Go to an execution id", key_display=":", show=False, priority=True)


def parse_id(text: str) -> int | None:
    """``1234`` or ``#1234`` (an id as lists and links show it); None if not an id."""
    digits = text.strip().lstrip("#").replace(",", "").replace("_", "")
    if not digits.isdigit() or not 0 < int(digits) < 2**63:
        return None
    return int(digits)


class GotoModal(ModalScreen[int | None]):
    DEFAULT_CSS = """
    GotoModal { align: center top; }
    GotoModal > Vertical {
        width: 50;
        max-width: 100%;
        height: auto;
        margin-top: 3;
        border: thick $accent;
        background: $surface;
        padding: 0 1;
    }
    GotoModal #goto-why { color: $warning; }
    GotoModal #goto-keys { color: $text-muted; }
    """
    AUTO_FOCUS = "#goto-id"
    BINDINGS = [Binding("escape", "give_up", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Go to execution", id="goto-title")
            yield Input(placeholder="execution id, e.g. 1234", id="goto-id")
            yield Static("", id="goto-why")
            yield Static("[b]enter[/b] open    [b]esc[/b] cancel", id="goto-keys")

    @property
    def field(self) -> Input:
        return self.query_one("#goto-id", Input)

    def on_key(self, event: events.Key) -> None:
        """Keys that reached the prompt itself, not its field (typed before the field had the
        focus): they are the id's."""
        field = self.field
        if field.has_focus:
            return
        if event.key == "enter":
            event.stop()
            self.submit(field.value)
        elif event.key == "backspace":
            event.stop()
            field.value = field.value[:-1]
        elif event.character and event.character.isprintable():
            event.stop()
            field.value += event.character
            field.cursor_position = len(field.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.submit(event.value)

    def submit(self, text: str) -> None:
        execution_id = parse_id(text)
        if execution_id is None:
            self.query_one("#goto-why", Static).update(f"not an execution id: {text.strip()[:30]!r}")
            return
        self.dismiss(execution_id)

    def action_give_up(self) -> None:
        self.dismiss(None)


class GotoExecution:
    """The ``:`` action of a list screen (mixed into it beside ``GOTO_BINDING``)."""

    app: Any

    def action_goto_execution(self) -> None:
        focused = self.app.focused
        if isinstance(focused, (Input, TextArea)):
            focused.post_message(events.Key("colon", ":"))
            return

        def open_it(execution_id: int | None) -> None:
            from ..screens.detail import DetailScreen

            if execution_id is not None:
                self.app.push_screen(DetailScreen(execution_id))

        self.app.push_screen(GotoModal(), open_it)
