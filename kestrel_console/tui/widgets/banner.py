"""The strip at the top of every screen that says the database is unreachable (or slow) and
that the console keeps retrying; hidden while all is well."""

from __future__ import annotations

from textual.widgets import Static

from ...safe_text import literal


class Banner(Static):
    """Shows ``app.db_problem``, else ``app.lag_problem`` (the read replica too far behind); the
    screen's data stays as it was until the database is back."""

    DEFAULT_CSS = """
    Banner {
        display: none;
        height: auto;
        padding: 0 1;
        background: $error;
        color: $text;
        text-style: bold;
    }
    Banner.-shown { display: block; }
    Banner.-slow { background: $warning; color: $background; }
    """

    def on_mount(self) -> None:
        self.watch(self.app, "db_problem", self._show, init=True)
        if hasattr(self.app, "lag_problem"):
            self.watch(self.app, "lag_problem", self._show, init=False)

    def _show(self, _changed: object = None) -> None:
        problem = getattr(self.app, "db_problem", None)
        lag = getattr(self.app, "lag_problem", None)
        if not problem and lag:
            problem = ("slow", lag)
        if not problem:
            self.remove_class("-shown", "-slow")
            self.update("")
            return
        kind, message = problem
        self.set_class(kind == "slow", "-slow")
        self.add_class("-shown")
        self.update(literal(message, newlines=True))  # quotes the server's words

    @property
    def text(self) -> str:
        """What the banner says now ("" when hidden)."""
        return getattr(self.content, "plain", str(self.content)) if self.has_class("-shown") else ""
