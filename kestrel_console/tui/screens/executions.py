"""Screen 2, executions: newest first, filtered with ``/``, one page at a time, updated in
place; the first page follows the newest rows (a live tail) until the operator moves down, then
counts the rows that arrived above ("N new", ``g``/Home jumps back); ``space`` marks rows and
``e``/``c`` act on the marked ones (or the one under the cursor); ``s``/``S`` or a click on a
header sort the page by a column."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Static

from ... import formatting as fmt
from ...humanize import duration
from ...read import Reader
from ...safe_text import visible
from ..bulk_flow import BULK_KEY, BulkFlow
from ..event_flow import EVENT_KEY, SendEventFlow
from ..filter_line import FilterLine
from ..filters import ExecutionFilter, parse_filter
from ..live import LiveScreen
from ..operator import ActionOutcome, Target, behind_replica
from ..state_actions import STATE_BINDINGS, StateActions
from ..widgets.banner import Banner
from ..widgets.footer import KeyFooter
from ..widgets.goto import GOTO_BINDING, GotoExecution
from ..widgets.live_table import Column, LiveTable

PAGE_SIZE = 100
# At 80 columns (squeeze) long names are cut, so that status, age and duration stay in sight
# (enter shows the whole execution). Each column sorts by the stored value, not the text shown
# (2h after 9m).
COLUMNS = [
    Column("id", sort="id"),
    Column("workflow", squeeze=18, sort="workflow_name"),
    Column("status", sort="status"),
    Column("age", sort="age_s"),
    Column("duration", sort="duration_s"),
    Column("owner", squeeze=14, sort="owner_id"),
    Column("step", "current step", squeeze=14, sort="current_step"),
    Column("error", sort="error"),
]


class ExecutionsScreen(StateActions, BulkFlow, SendEventFlow, GotoExecution, FilterLine, LiveScreen):
    VIEW = "executions"
    NAME = "Executions"
    FILTER_LINE = "exec-filter"
    BINDINGS: ClassVar[list[Any]] = [
        GOTO_BINDING,
        Binding("slash", "filter", "Filter"),
        Binding(
            "space", "mark", "Mark", tooltip="mark or unmark the row, then move down; actions apply to every marked row"
        ),
        *STATE_BINDINGS,
        Binding(
            BULK_KEY,
            "bulk",
            "Bulk",
            show=False,
            tooltip="cancel, re-enqueue, pause or resume every execution the filter selects: a preview of the"
            " exact ids first",
        ),
        Binding(
            EVENT_KEY,
            "send_event",
            "Send event",
            show=False,
            tooltip="send an event: its key, then its payload as JSON; the executions waiting for it resume",
        ),
        # Paging is hinted on the line above the table, keeping the footer inside 80 columns.
        Binding("right_square_bracket", "page(1)", "Older", key_display="]", show=False),
        Binding("left_square_bracket", "page(-1)", "Newer", key_display="[", show=False),
        Binding(
            "escape",
            "clear",
            "Back/clear",
            show=False,
            tooltip="close the filter line, else clear the marks, else back to the dashboard the list was"
            " opened from, else clear the filter",
        ),
        Binding(
            "g",
            "first_row",
            "Newest",
            show=False,
            tooltip="first row (home too): the newest; the list follows the newest rows again",
        ),
        Binding("G", "last_row", "Last row", show=False, tooltip="last row (end too)"),
        Binding("s", "sort_next", "Sort", tooltip="sort the page by the next column (a click on a header too)"),
        Binding("S", "sort_reverse", "Reverse sort", show=False, tooltip="reverse the sort (ascending, descending)"),
    ]
    HELP_EXTRA = [
        ("enter", "open the execution: timeline, input, output, error"),
        ("↑ ↓ pgup pgdn", "move in the list; on the first page, moving down stops following the newest rows"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.filter = ExecutionFilter()
        self.page_starts: list[int | None] = [None]  # before_id of each page seen
        # A page asked for is loading: page keys typed meanwhile wait for it (net pages to move),
        # as the next page starts after the last row of this one.
        self.paging = False
        self.pages_typed_ahead = 0
        self.rows: list[dict[str, Any]] = []
        self.unknown: str | None = None  # "no workflow named 'x'; did you mean y?" for an empty list
        # Whether the rows shown are those of the filter and page asked for (False while the
        # first read of a new filter or page runs: "searching…", never "0 rows"), and why the
        # last read failed, if it did.
        self.known = False
        self.estimate: int | None = None
        self.failure: str | None = None
        # The live tail: on the first page a cursor on the first row stays on the newest row
        # (``following``); elsewhere, rows arriving above are counted.
        self.following = True
        self.new_above = 0
        # The screen a dashboard count opened this list from: esc and q go back to it.
        self.came_from: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Banner()
        yield self.filter_input(
            "status:error workflow:remediate input.pod=api-1 key:K id:N since:2h from:T until:T text"
        )
        yield Static("", id="exec-where")
        yield Static("", id="exec-bulk")  # a bulk action's progress, then its result (b)
        yield LiveTable(COLUMNS, markable=True, default_sort=("id", True), id="executions")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#exec-bulk", Static).display = False
        self._describe()  # then FilterLine's on_mount: the line hidden, the table focused

    @work(thread=True, exclusive=True, group="executions", exit_on_error=False)
    def load(self, seq: int) -> None:
        f, before = self.filter, self.page_starts[-1]

        def read(r: Reader) -> tuple[list[dict[str, Any]], str | None, int | None]:
            rows = r.list_executions(where=f, limit=PAGE_SIZE, before_id=before)
            # An empty first page under workflow:X may be a typo: say so (read here, off the UI thread).
            unknown = r.unknown_workflow(f.workflow) if f.workflow and not rows and before is None else None
            # More than a page matches: how many, as the planner estimates it (a count would
            # read every match of a big history).
            estimate = r.estimate_executions(f) if len(rows) >= PAGE_SIZE and not f.empty else None
            return rows, unknown, estimate

        self.fetch(seq, read, self.show)

    def show(self, page: tuple[list[dict[str, Any]], str | None, int | None]) -> None:
        rows, self.unknown, self.estimate = page
        self.rows = rows
        self.known = True
        self.failure = None
        before = set(self.table.rows_data)
        # Following the newest: the cursor is on the first row (wherever the operator, a key or
        # a click put it) when the refresh lands.
        self.following = self.table.cursor_row == 0 and not self.table.marks
        awaiting = self.kapp.awaiting_replica
        # newest first, else the sort chosen
        self.table.sync((str(r["id"]), _cells(r, awaiting.get(r["id"])), r) for r in rows)
        if len(self.page_starts) == 1 and before:
            self._tail(len([k for k in self.table.rows_data if k not in before]))
        self.paging = False
        self._describe()
        self.selection_changed()
        if self.pages_typed_ahead:
            step = 1 if self.pages_typed_ahead > 0 else -1
            self.pages_typed_ahead -= step
            self.action_page(step)

    def _tail(self, arrived: int) -> None:
        """After a refresh of the first page: keep the cursor on the newest row while
        following, else count the rows that arrived above the operator's."""
        table = self.table
        if not self.following:
            self.new_above += arrived
            return
        self.new_above = 0
        keys = table.keys()
        current = table.cursor_key()
        if keys and current is not None and current != keys[0]:
            # An action must not reach the newer row the cursor was just moved to: the next
            # key is refused, naming the row the operator saw under it (live.py).
            if table.cursor_lost is None:
                table.lose_cursor(current, "moved down as newer executions arrived (the list follows the newest)")
            table.move_cursor(row=0, animate=False)
        table.scroll_to(y=0, animate=False)

    def action_first_row(self) -> None:
        self.table.action_scroll_top()

    def action_last_row(self) -> None:
        self.table.action_scroll_bottom()

    def on_live_table_cursor_moved(self, event: LiveTable.CursorMoved) -> None:
        """The operator moved: on the first row the list follows the newest again."""
        self.following = self.table.cursor_row == 0
        if self.following:
            self.new_above = 0
        self._describe()

    def on_live_table_top_shown(self, event: LiveTable.TopShown) -> None:
        self._describe()

    def action_rows(self) -> list[dict[str, Any]]:
        return [self.table.rows_data[k] for k in self.table.chosen() if k in self.table.rows_data]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.selection_changed()

    def load_failed(self, exc: Exception) -> None:
        from ...read import ReadTimeout

        self.failure = "timed out" if isinstance(exc, ReadTimeout) else "failed"
        self.paging = False
        self._describe()

    def _count_text(self) -> str:
        """How many rows, only when known: "searching…" while the first read of this filter or
        page runs, "timed out, narrow the filter" after it was cancelled, never "0 rows"."""
        if not self.known:
            if self.failure == "timed out":
                return "timed out, narrow the filter"
            if self.failure:
                return "not read: the database did not answer"
            return "searching…"
        said = f"{len(self.rows)} rows"
        if self.estimate is not None and self.estimate > len(self.rows):
            said += f" of ≈{fmt.count(self.estimate)} matching (the planner's estimate)"
        if self.failure:
            said += f", the last refresh {self.failure}"
        return said

    def _position(self) -> str:
        """Where the list is: "page N", or on the first page, how many newer rows are above
        the operator's sight (never "page 1" while the newest rows are hidden)."""
        page = len(self.page_starts)
        if page > 1:
            return f"page {page}"
        if self.new_above:
            return f"{self.new_above} new above (g: newest)"
        if self.table.top_hidden():
            return "newest rows above (g: newest)"
        return "page 1, newest" + (" (following)" if self.following and self.known else "")

    def _describe(self) -> None:
        where = self.filter.describe()
        marked = f" · {len(self.table.marks)} marked" if self.table.marks else ""
        more = self.table.sort_note() + self.table.more_hint()
        if self.pages_typed_ahead:
            more += f" · loading, then {abs(self.pages_typed_ahead)} more page(s)"
        if self.stale:
            more += " · refreshing…"
        line = Text(f"{where} · {self._position()} ({self._count_text()}, ] older [ newer){marked}{more}", style="dim")
        if self.unknown:
            line.append(f" · {visible(self.unknown)}", style="bold yellow")  # quotes workflow names
        self.query_one("#exec-where", Static).update(line)

    def on_live_table_clipped(self, event: LiveTable.Clipped) -> None:
        self._describe()

    def stale_changed(self) -> None:
        self._describe()

    # -- filter and paging ----------------------------------------------------------------------

    def read_filter(self, text: str) -> ExecutionFilter:
        return parse_filter(text)

    def filter_applied(self, wanted: ExecutionFilter) -> None:
        self.filter = wanted
        self._restart()

    def show_filtered(self, wanted: ExecutionFilter, came_from: str | None = None) -> None:
        """Show the executions ``wanted`` selects, from the first page (a dashboard count);
        ``came_from``: the mode esc and q go back to."""
        self.filter_line.display = False
        self.came_from = came_from
        self.filter_applied(wanted)

    def _restart(self) -> None:
        self.page_starts = [None]
        self.following, self.new_above = True, 0
        self.pages_typed_ahead = 0
        self.rows = []
        self.known = False
        self.failure = None
        self.unknown = None
        self.table.reset()
        self.set_focus(self.table)
        self._describe()
        self.refresh_data(force=True)

    async def action_clear(self) -> None:
        """esc, one level back: close the filter line, else clear the marks, else go back to
        the dashboard this list was opened from, else clear the filter."""
        if self.close_filter_line():
            return
        if self.table.marks:
            self.table.clear_marks()
            self._describe()
        elif self.came_from:
            await self.kapp.action_back()
        elif not self.filter.empty:
            self.kapp.tell(f"filter {self.filter} cleared (esc): showing all executions")
            self.filter = ExecutionFilter()
            self._restart()

    def action_page(self, direction: int) -> None:
        if self.paging:  # the page asked for is not here yet: move once it is
            self.pages_typed_ahead += direction
            self._describe()
            return
        if direction > 0:
            if len(self.rows) < PAGE_SIZE:
                self.kapp.tell("no older executions", severity="information")
                return
            self.page_starts.append(int(self.rows[-1]["id"]))
        else:
            if len(self.page_starts) == 1:
                self.kapp.tell("already on the newest page (it refreshes by itself; r re-reads it now)")
                return
            self.page_starts.pop()
        self.following, self.new_above = True, 0
        self.rows = []
        self.known = False
        self.failure = None
        self.table.reset()
        self.paging = True
        self._describe()
        self.refresh_data(force=True)

    # -- sort -------------------------------------------------------------------------------------

    def action_sort_next(self) -> None:
        self.table.sort_next()

    def action_sort_reverse(self) -> None:
        self.table.sort_reverse()

    def on_live_table_sorted(self, event: LiveTable.Sorted) -> None:
        self._describe()

    # -- marks and actions --------------------------------------------------------------------

    def action_mark(self) -> None:
        self.table.toggle_mark()
        self.table.action_cursor_down()
        self._describe()
        self.selection_changed()

    def cursor_table(self) -> LiveTable:
        return self.table

    def describe_row(self, key: str | None) -> str:
        return f"execution {key}"

    def current_status(self, target: Target) -> str | None:
        row = self.table.rows_data.get(str(target.execution_id))
        return row["status"] if row is not None else None

    def targets(self) -> list[Target]:
        return [
            Target(int(k), self.table.rows_data[k]["workflow_name"], self.table.rows_data[k]["status"])
            for k in self.table.chosen()
        ]

    def after_action(self, outcome: ActionOutcome) -> None:
        self.table.acted_on(str(t.execution_id) for t in outcome.done)
        self.table.clear_marks()
        self._describe()
        self.selection_changed()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        from .detail import DetailScreen

        event.stop()
        if event.row_key.value is not None:
            self.app.push_screen(DetailScreen(int(event.row_key.value)))


def _cells(r: dict[str, Any], awaiting: tuple[str, int] | None = None) -> dict[str, Any]:
    """``awaiting``: the execution was acted on and the read replica has not replayed it yet
    (its status on the primary): the row says so beside the replica's old status."""
    return {
        "id": str(r["id"]),
        "workflow": r["workflow_name"],
        "status": fmt.status(r["status"]) + behind_replica(awaiting),
        "age": duration(r["age_s"], compact=True, clamp=True),
        "duration": duration(r["duration_s"], compact=True, clamp=True),
        "owner": r["owner_id"] or "",
        "step": r["current_step"] or "",
        "error": (r["error"] or "").splitlines()[0][:80] if r["error"] else "",
    }
