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

CLOSES = "esc, q or ? closes"
MORE_BELOW = "↓ more below (↓ pgdn end)"

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
        """Every key the help names (each number key is named in the screens' row)."""
        from ..registry import help_rows

        return [key for _, rows in self.sections for key, _ in rows] + [key for key, _ in help_rows()]

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for i, (title, rows) in enumerate(self.sections):
            if i:
                table.add_row("", "")
            table.add_row(Text(title, style="bold underline"), "")
            for key, what in rows:
                table.add_row(key, what)
        if getattr(self.app, "read_only", False):
            table.add_row("", "")
            table.add_row(Text("read-only", style="bold yellow"), "approve, reject, re-enqueue and cancel are disabled")
        with VerticalScroll(id="help-body"):
            yield Static(table, id="help-keys")

    def on_mount(self) -> None:
        body = self.query_one("#help-body", VerticalScroll)
        body.border_title = "Keys"
        self.watch(body, "scroll_y", lambda _old, _new: self._say_more(), init=False)
        self.call_after_refresh(self._say_more)

    def on_resize(self) -> None:
        self.call_after_refresh(self._say_more)

    def _say_more(self) -> None:
        """At 80x24 a screen's keys may not all fit: the frame's foot says so while more is
        below (and always how to close)."""
        body = self.query_one("#help-body", VerticalScroll)
        more = body.scroll_y < body.max_scroll_y
        body.border_subtitle = f"{MORE_BELOW} · {CLOSES}" if more else CLOSES

    def action_close(self) -> None:
        self.dismiss(None)


def _everywhere(app: Any) -> list[tuple[str, str]]:
    """The app's keys, the number keys in one row that names each screen's."""
    from ..registry import help_rows

    rows = []
    for key, what in key_rows(app, list(app.BINDINGS)):
        if what == "Screens":  # one row naming each number key: 24 rows hold the whole help
            rows.append((key, "screens: " + " · ".join(f"{n} {label}" for n, label in help_rows())))
        elif (key, what) not in help_rows():
            rows.append((key, what))
    return rows + ALWAYS
