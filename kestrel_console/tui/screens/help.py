"""``?``: every key of the screen below and every key that works everywhere (actions are left
out in --read-only mode, as they are disabled)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

# Keys that work in every screen without being one of the app's bindings.
ALWAYS = [("ctrl+p", "command palette: screens, reports, actions"), ("ctrl+q", "quit at once")]


# How a key is written in the help, the footer and docs/console.md: as on the keyboard.
KEY_NAMES = {
    "escape": "esc",
    "slash": "/",
    "question_mark": "?",
    "space": "space",
    "right_square_bracket": "]",
    "left_square_bracket": "[",
    "plus": "+",
    "minus": "-",
}


def key_label(binding: Binding) -> str:
    """A binding's key as the help writes it (its key_display, else its first key's name)."""
    if binding.key_display:
        return binding.key_display
    key = binding.key.split(",")[0].strip()
    if key.startswith("ctrl+"):
        return "^" + KEY_NAMES.get(key[5:], key[5:]).replace("down", "↓").replace("up", "↑")
    return KEY_NAMES.get(key, key)


def key_rows(node: Any, bindings: list[Any]) -> list[tuple[str, str]]:
    """(key, description) of each binding the node currently allows."""
    rows = []
    for binding in Binding.make_bindings(bindings):
        if binding.system:
            continue
        allowed = getattr(node, "listed_in_help", node.check_action)(binding.action, ())
        if allowed is False:
            continue
        key = key_label(binding)
        # The tooltip, where a binding has one, is the longer form of its footer label.
        row = (key, binding.tooltip or binding.description or binding.action.replace("_", " "))
        if row not in rows:  # one binding with several keys shares one key_display
            rows.append(row)
    return rows


class HelpScreen(ModalScreen[None]):
    CSS_PATH = "help.tcss"
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, under: Screen) -> None:
        super().__init__()
        self.under = under
        name = getattr(under, "NAME", type(under).__name__)
        self.sections: list[tuple[str, list[tuple[str, str]]]] = [
            (f"{name} screen", key_rows(under, list(under.BINDINGS)) + list(getattr(under, "HELP_EXTRA", []))),
            ("Everywhere", _everywhere(under.app)),
        ]

    @property
    def keys(self) -> list[str]:
        return [key for _, rows in self.sections for key, _ in rows]

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for title, rows in self.sections:
            table.add_row(Text(title, style="bold underline"), "")
            for key, what in rows:
                table.add_row(key, what)
            table.add_row("", "")
        if getattr(self.app, "read_only", False):
            table.add_row(Text("read-only", style="bold yellow"), "approve, reject, re-enqueue and cancel are disabled")
        with VerticalScroll(id="help-body"):
            yield Static(table, id="help-keys")
        yield Static("esc, q or ? closes", id="help-foot")

    def on_mount(self) -> None:
        self.query_one("#help-body").border_title = "Keys"

    def action_close(self) -> None:
        self.dismiss(None)


def _everywhere(app: Any) -> list[tuple[str, str]]:
    """The app's keys, each screen's number key listed on its own (the footer shows one hint)."""
    from ..registry import help_rows

    rows = []
    for key, what in key_rows(app, list(app.BINDINGS)):
        if what == "Screens":
            rows += [(key, "screens: " + ", ".join(label for _, label in help_rows())), *help_rows()]
        elif (key, what) not in help_rows():
            rows.append((key, what))
    return rows + ALWAYS
