"""Screen 4, ad-hoc SQL: an editor with SQL highlighting, run through the read-only guard;
results with row count and time; refusals and errors inline; a history of past queries kept
between sessions (``history.py``). When the queries cannot run as the read-only role, or the
login is a superuser, a line under the status says so."""

from __future__ import annotations

import importlib.util
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Header, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from kestrel_core import DatabaseUnavailable, first_line

from ...safe_text import literal, visible
from ..adhoc_session import AdhocSession
from ..config import ADHOC_MAX_ROWS, ADHOC_TIMEOUT_MS
from ..history import QueryHistory
from ..live import LiveScreen
from ..widgets.banner import Banner
from ..widgets.footer import KeyFooter
from ..widgets.results import ResultsTable, summary

EXAMPLE = "SELECT status, count(*)\n  FROM workflow_executions\n GROUP BY status\n ORDER BY 2 DESC;\n"
HINT = (
    "ctrl+r runs the query (typing replaces the selected sample) · ↑ on the first line, ↓ on the last: "
    "history · esc leaves the editor; esc again cancels a running query; i edits again"
)


def sql_language() -> str | None:
    """'sql' when the tree-sitter SQL grammar is installed (``textual[syntax]``), else None:
    the editor then shows plain text."""
    if importlib.util.find_spec("tree_sitter") and importlib.util.find_spec("tree_sitter_sql"):
        return "sql"
    return None


def editor_title(config: Any) -> str:
    """The editor's title: read-only, the search path, and the opt-in to a privileged login."""
    title = f"SQL (read-only; search_path = {config.schema})"
    if config.allow_privileged_sql:
        title += " — --allow-privileged-sql: a superuser login may run these"
    return title


class SqlScreen(LiveScreen):
    VIEW = "sql"
    NAME = "SQL"
    CSS_PATH = "sql.tcss"
    REFRESHES = False  # runs when asked, not on a timer
    BINDINGS: ClassVar[list[Any]] = [
        Binding("ctrl+enter,ctrl+r,f5", "run", "Run", priority=True, key_display="^r"),
        Binding("escape", "escape", "Leave", priority=True),
        Binding("ctrl+a", "select_all", "All", priority=True, key_display="^a"),
        Binding("ctrl+l", "clear", "Clear the editor", priority=True, key_display="^l", show=False),
        Binding("ctrl+up", "history(1)", "History", priority=True, key_display="^↑↓"),
        Binding("ctrl+down", "history(-1)", "Newer query", priority=True, show=False),
        Binding("i", "edit", "Edit (back into the editor)", show=False),
        Binding("ctrl+s", "export", "Export", priority=True, key_display="^s"),
    ]
    HELP_EXTRA = [
        ("ctrl+enter, f5", "run the query, as ctrl+r does"),
        ("↑ / ↓ (first / last line)", "older / newer query from the history"),
        ("esc (outside the editor)", "cancel the running query"),
        ("enter (history)", "load the selected past query into the editor"),
        ("enter (result row)", "open the execution its execution_id or id column names"),
        ("tab (outside the editor)", "move between results and history"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.past = QueryHistory()
        self.history: list[str] = []  # newest first (the past queries, as listed)
        self._history_pos = -1
        self.session: AdhocSession | None = None
        self.result: Any = None
        self.message: str = ""  # the last status/refusal/error line, as shown
        self.notice: str = ""  # what the read-only role could not promise, as shown

    def compose(self) -> ComposeResult:
        yield Header()
        yield Banner()
        with Horizontal(id="sql-top"):
            yield SqlEditor.code_editor(EXAMPLE, language=sql_language(), id="sql-editor")
            yield OptionList(id="sql-history")
        yield Static("", id="sql-status")
        yield Static("", id="sql-notice")
        yield ResultsTable(id="sql-results")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.session = AdhocSession(self.kapp.config)
        self.kapp.track_session(self.session)
        self.query_one("#sql-editor").border_title = editor_title(self.kapp.config)
        self.query_one("#sql-history").border_title = "History"
        self._say(HINT, "dim")
        self.history = list(self.past.load())
        self._list_history()
        if self.past.error:
            self.kapp.tell(self.past.error, severity="warning")
        self.editor.select_all()  # typing replaces the sample instead of being appended to it
        self.editor.focus()

    # The SQL screen does not refresh on a timer: it runs what the operator asks for.
    @property
    def editor(self) -> TextArea:
        return self.query_one("#sql-editor", TextArea)

    def _say(self, text: str, style: str = "") -> None:
        text = visible(text, newlines=True)  # database errors quote values
        self.message = text
        self.query_one("#sql-status", Static).update(Text(text, style=style))

    # -- running ----------------------------------------------------------------------------------

    def action_run(self) -> None:
        editor = self.editor
        query = (editor.selected_text or editor.text).strip()
        if not query:
            self._say("nothing to run: type a query", "yellow")
            return
        assert self.session is not None
        if not self.session.reserve():
            self._say("a query is still running: esc outside the editor cancels it", "yellow")
            return
        self._remember(query)
        self._say("running… (esc outside the editor cancels it)", "italic")
        self.execute(query)

    @work(thread=True, exclusive=True, group="sql", exit_on_error=False)
    def execute(self, query: str) -> None:
        from kestrel_console.adhoc import run_read_only

        cfg = self.kapp.config
        assert self.session is not None
        try:
            result = self.session.run(
                lambda conn: run_read_only(
                    conn,
                    query,
                    schema=cfg.schema,
                    timeout_ms=ADHOC_TIMEOUT_MS,
                    max_rows=ADHOC_MAX_ROWS,
                    allow_privileged=cfg.allow_privileged_sql,
                )
            )
        except Exception as exc:
            self._to_ui(self._failed_query, exc)
            return
        self._to_ui(self._show_result, result)

    def _show_result(self, result: Any) -> None:
        self.result = result
        self.kapp.db_ok()
        self.query_one(ResultsTable).show(result)
        self._say(summary(result, ADHOC_MAX_ROWS), "green")
        # Layer 3 weaker than promised (superuser login, no reader role): say so, apart.
        self.notice = getattr(result, "notice", None) or ""
        self.query_one("#sql-notice", Static).update(Text(self.notice, style="yellow"))

    def _failed_query(self, exc: Exception) -> None:
        from kestrel_console.adhoc import QueryFailed, QueryRefused, QueryTimeout

        self._clear_result()  # a refusal or an error never sits above the previous result
        if isinstance(exc, QueryRefused):
            self._say(f"refused: {exc.reason}", "bold red")
        elif isinstance(exc, QueryTimeout):
            self._say(f"timed out (or cancelled): {exc}", "bold yellow")
        elif isinstance(exc, QueryFailed) and exc.sqlstate == "57014":
            self._say("cancelled", "yellow")
        elif isinstance(exc, QueryFailed):
            where = f" (at character {exc.position})" if exc.position else ""
            self._say(f"error{where}: {exc}", "bold red")
        elif isinstance(exc, DatabaseUnavailable):
            self.kapp.db_failed(exc)
            self._say(f"not run: {first_line(exc)}", "bold red")
        else:
            self._say(f"error: {type(exc).__name__}: {exc}", "bold red")

    def _clear_result(self) -> None:
        self.result = None
        table = self.query_one(ResultsTable)
        table.clear(columns=True)
        table.result = None

    def action_select_all(self) -> None:
        self.editor.focus()
        self.editor.select_all()

    def action_clear(self) -> None:
        self.editor.clear()
        self.editor.focus()
        self._history_pos = -1

    def action_escape(self) -> None:
        """One level up: in the editor, leave it (so the number keys, q... work again);
        outside it, cancel the running query, else nothing (this screen is the top: q quits,
        i or enter on the history goes back into the editor). From the editor, esc twice
        cancels."""
        if self.focused is self.editor:
            self.query_one(ResultsTable).focus()
        elif self.session is not None and self.session.cancel():
            self._say("cancelling…", "yellow")

    def action_edit(self) -> None:
        self.editor.focus()

    # -- history ------------------------------------------------------------------------------------

    def _remember(self, query: str) -> None:
        self.past.add(query)
        if self.past.error:
            self.kapp.tell(self.past.error, severity="warning")
            self.past.error = None
        self.history = list(self.past.entries)
        self._history_pos = -1
        self._list_history()

    def _list_history(self) -> None:
        options = self.query_one("#sql-history", OptionList)
        options.clear_options()
        options.add_options(Option(literal(" ".join(q.split())[:200]), id=str(i)) for i, q in enumerate(self.history))

    def action_history(self, step: int) -> None:
        """``step`` 1: one query older; -1: one newer (past the newest: an empty editor)."""
        if not self.history or (self._history_pos == -1 and step < 0):
            return
        pos = max(-1, min(len(self.history) - 1, self._history_pos + step))
        self._history_pos = pos
        self.editor.text = self.history[pos] if pos >= 0 else ""
        self.editor.focus()

    def on_sql_editor_history(self, event: SqlEditor.History) -> None:
        event.stop()
        self.action_history(event.step)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        index = int(event.option.id or 0)
        self._history_pos = index
        self.editor.text = self.history[index]
        self.editor.focus()

    # -- export -------------------------------------------------------------------------------------

    def on_results_table_open_execution(self, event: ResultsTable.OpenExecution) -> None:
        from .detail import DetailScreen

        self.app.push_screen(DetailScreen(event.execution_id))

    def action_export(self) -> None:
        from ..export import export_result

        export_result(self, self.result, "query")


class SqlEditor(TextArea):
    """The query editor: ↑ on its first line and ↓ on its last step through the history (as
    in psql and harlequin) instead of doing nothing."""

    class History(Message):
        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0 and self.selection.is_empty:
            self.post_message(self.History(1))
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] >= self.document.line_count - 1 and self.selection.is_empty:
            self.post_message(self.History(-1))
            return
        super().action_cursor_down(select)
