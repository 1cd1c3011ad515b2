"""Screen 4, ad-hoc SQL: an editor with SQL highlighting, run through the read-only guard;
results with row count and time; refusals and errors inline; a history of past queries kept
between sessions (``history.py``). When the queries cannot run as the read-only role, or the
login is a superuser, a line under the status says so.

``ctrl+r`` runs what the editor holds once it has handled every key typed before it (a
priority binding is handled as it arrives, ahead of keys still queued for the editor): the
selection if there is one, else the whole text; the editor's border says which, and the
status line says what ran. sqlglot formats the query (``ctrl+f``) and completes table and
column names from the live schema (``ctrl+n``, or ``ctrl+space``); the guard that decides what
may run stays on PostgreSQL's own parser."""

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
from ..config import ADHOC_MAX_ROWS
from ..history import QueryHistory
from ..live import LiveScreen
from ..widgets.banner import Banner
from ..widgets.footer import KeyFooter
from ..widgets.results import ResultsTable, summary

EXAMPLE = "SELECT status, count(*)\n  FROM workflow_executions\n GROUP BY status\n ORDER BY 2 DESC;\n"
HINT = (
    "ctrl+r runs the query (typing replaces the selected sample; a selection runs alone) · ctrl+f formats · "
    "ctrl+n completes names · ↑ on the first line, ↓ on the last: history · esc leaves the editor; esc again "
    "cancels a running query; i edits again"
)
# How much of the query the status line quotes.
QUOTED_CHARS = 40


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
        Binding("ctrl+f", "format", "Format", priority=True, key_display="^f", show=False),
        Binding("ctrl+n,ctrl+space", "complete", "Complete", priority=True, key_display="^n", show=False),
    ]
    HELP_EXTRA = [
        ("ctrl+enter, f5", "run the query, as ctrl+r does (the selection alone when there is one)"),
        ("ctrl+f", "format the query (sqlglot, dialect postgres)"),
        ("ctrl+n, ctrl+space", "complete the table or column name before the cursor"),
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
        self.ran: str = ""  # what the last run ran, as the status line says it
        self.names: Any = None  # sql_assist.SchemaNames, read once on the first completion

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
        self._show_scope()

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
        """ctrl+r is a priority binding: it is handled as it reaches the app, while keys typed
        before it may still wait in the editor's queue. The text is read by a callback queued
        behind them, once the editor has handled them all."""
        self.editor.call_later(self._run_what_the_editor_holds)

    def _run_what_the_editor_holds(self) -> None:
        query, scope = self._to_run()
        if not query:
            self._say("nothing to run: type a query", "yellow")
            return
        assert self.session is not None
        if not self.session.reserve():
            self._say("a query is still running: esc outside the editor cancels it", "yellow")
            return
        self.ran = describe_run(query, scope)
        self._remember(query)
        self._say(f"running {self.ran}… (esc outside the editor cancels it)", "italic")
        self.execute(query)

    def _to_run(self) -> tuple[str, str]:
        """(query, "the selection" or "the whole editor"): a selection that is only part of
        the text runs alone."""
        editor = self.editor
        selected, whole = editor.selected_text.strip(), editor.text.strip()
        if selected and selected != whole:
            return selected, "the selection"
        return whole, "the whole editor"

    def _show_scope(self) -> None:
        """The editor's border says what ctrl+r would run now."""
        _, scope = self._to_run()
        self.editor.border_subtitle = f"ctrl+r runs {scope}"

    def on_text_area_selection_changed(self, event: TextArea.SelectionChanged) -> None:
        self._show_scope()

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        self._show_scope()

    @work(thread=True, exclusive=True, group="sql", exit_on_error=False)
    def execute(self, query: str) -> None:
        from kestrel_console.adhoc import run_read_only

        session = self.session
        assert session is not None
        try:
            result = session.run(lambda conn: run_read_only(conn, query, **session.limits()))
        except Exception as exc:
            self._to_ui(self._failed_query, exc)
            return
        self._to_ui(self._show_result, result)

    def _show_result(self, result: Any) -> None:
        self.result = result
        self.kapp.db_ok()
        self.query_one(ResultsTable).show(result)
        self._say(f"{summary(result, ADHOC_MAX_ROWS)} · ran {self.ran}", "green")
        # Layer 3 weaker than promised (superuser login, no reader role): say so, apart.
        self.notice = getattr(result, "notice", None) or ""
        self.query_one("#sql-notice", Static).update(Text(self.notice, style="yellow"))

    def _failed_query(self, exc: Exception) -> None:
        from kestrel_console.adhoc import QueryFailed, QueryRefused, QueryTimeout

        self._clear_result()  # a refusal or an error never sits above the previous result
        ran = f" (ran {self.ran})" if self.ran else ""
        if isinstance(exc, QueryRefused):
            self._say(f"refused: {exc.reason}{ran}", "bold red")
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

    # -- sqlglot: formatting and completion -------------------------------------------------------

    def action_format(self) -> None:
        """Format the whole query (sqlglot, dialect postgres), once queued keys are in."""
        self.editor.call_later(self._format_now)

    def _format_now(self) -> None:
        from ..sql_assist import FormatError, format_sql

        try:
            formatted = format_sql(self.editor.text)
        except FormatError as exc:
            self._say(f"not formatted (sqlglot cannot parse it): {exc}", "yellow")
            return
        if formatted != self.editor.text:
            self.editor.replace(formatted, (0, 0), self.editor.document.end)
        self._say("formatted (sqlglot, dialect postgres); ctrl+z undoes it", "dim")

    def action_complete(self) -> None:
        if self.names is None:
            self.read_names()
            return
        self.editor.call_later(self._complete_now)

    @work(thread=True, exclusive=True, group="sql-names", exit_on_error=False)
    def read_names(self) -> None:
        from ..sql_assist import SchemaNames

        assert self.session is not None
        schema = self.kapp.config.schema
        try:
            names = self.session.run(lambda conn: SchemaNames.read(conn, schema))
        except Exception as exc:
            self._to_ui(self._say, f"no completion: the schema's names could not be read: {first_line(exc)}", "yellow")
            return
        self._to_ui(self._names_read, names)

    def _names_read(self, names: Any) -> None:
        self.names = names
        self.editor.call_later(self._complete_now)

    def _complete_now(self) -> None:
        from ..sql_assist import MAX_SHOWN, complete

        editor = self.editor
        before = editor.get_text_range((0, 0), editor.cursor_location)
        found = complete(before, self.names, whole=editor.text)
        if found.insert:
            editor.insert(found.insert)
        if not found.candidates:
            self._say(f"no table or column starts with {found.word!r}", "yellow")
        elif len(found.candidates) > 1:
            shown = ", ".join(found.candidates[:MAX_SHOWN])
            more = f" (+{len(found.candidates) - MAX_SHOWN} more)" if len(found.candidates) > MAX_SHOWN else ""
            self._say(f"{len(found.candidates)} names: {shown}{more}", "dim")
        else:
            self._say(f"completed {found.candidates[0]}", "dim")

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


def describe_run(query: str, scope: str) -> str:
    """What ran, for the status line: which part, its size and its first line."""
    lines = query.splitlines()
    first = lines[0] if lines else ""
    quoted = first if len(first) <= QUOTED_CHARS else first[: QUOTED_CHARS - 1] + "…"
    size = f"{len(lines)} line{'s' if len(lines) != 1 else ''}, {len(query)} chars"
    return f"{scope} ({size}): {quoted}"


class SqlEditor(TextArea):
    """The query editor: ↑ on its first line and ↓ on its last step through the history (as
    in psql and harlequin) instead of doing nothing."""

    class History(Message):
        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

    def _build_highlight_map(self) -> None:
        # A text longer than the guard runs is refused anyway: highlighting a pasted 160 KB
        # one-liner held the console for 5-20 s (tree-sitter captures, on every render).
        from ...adhoc.guard import MAX_QUERY_BYTES

        if sum(map(len, self.document.lines)) > MAX_QUERY_BYTES:
            self._line_cache.clear()
            self._highlights.clear()
            return
        super()._build_highlight_map()

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
