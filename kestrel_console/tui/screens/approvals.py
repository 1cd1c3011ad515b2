"""Screen 4 (key 3), pending approvals: every gate waiting for a decision, oldest first, with
the details the workflow attached; ``a``/``x`` ask for a comment, confirm, then decide through
``kestrel_core`` as the --operator; ``/`` filters them by workflow, gate or the details they
carry (``risk:high``); ``s``/``S`` or a click on a header sort them by a column."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Static

from ... import formatting as fmt
from ...humanize import duration
from ...safe_text import visible
from ..filter_line import FilterLine
from ..gate_filter import gate_matches, words_of
from ..live import LiveScreen
from ..operator import ActionOutcome, Target, behind_replica
from ..widgets.banner import Banner
from ..widgets.details_box import DetailsBox
from ..widgets.footer import KeyFooter
from ..widgets.goto import GOTO_BINDING, GotoExecution
from ..widgets.live_table import Column, LiveTable

# At 80 columns (squeeze) a long workflow name or gate id is cut, so that waiting, since and
# deadline stay in sight (the details box below shows both whole). Each column sorts by the
# stored value (waiting 2h after 9m; details as their JSON text).
COLUMNS = [
    Column("execution", sort="execution_id"),
    Column("workflow", squeeze=12, sort="workflow_name"),
    Column("step", "gate", squeeze=12, sort="step_id"),
    Column("waiting", sort="waiting_s"),
    Column("since", sort="waiting_since"),
    Column("deadline", sort="deadline"),
    Column("details", squeeze=20, sort=lambda r: fmt.json_line(r["details"]) if r["details"] is not None else None),
]


class ApprovalsScreen(GotoExecution, FilterLine, LiveScreen):
    VIEW = "approvals"
    NAME = "Approvals"
    FILTER_LINE = "appr-filter"
    BINDINGS: ClassVar[list[Any]] = [
        GOTO_BINDING,
        Binding("slash", "filter", "Filter"),
        Binding("a", "approve", "Approve"),
        Binding("x", "reject", "Reject"),
        Binding(
            "space", "mark", "Mark", tooltip="mark or unmark the row, then move down; actions apply to every marked row"
        ),
        Binding("escape", "clear", "Clear marks/filter", show=False),
        Binding("s", "sort_next", "Sort", tooltip="sort by the next column (a click on a header too)"),
        Binding("S", "sort_reverse", "Reverse sort", show=False, tooltip="reverse the sort (ascending, descending)"),
    ]
    HELP_EXTRA = [
        ("enter", "open the execution of the gate under the cursor"),
        ("↑ ↓", "move; the gate's details show below"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: list[dict[str, Any]] = []  # every pending gate read
        self.filter_words: list[str] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Banner()
        yield self.filter_input("risk:high workflow:remediate gate:approve free text")
        yield Static("", id="appr-summary")
        # Oldest first as read, else the sort chosen.
        yield LiveTable(COLUMNS, markable=True, default_sort=("waiting", True), id="approvals")
        yield DetailsBox("Details attached by the workflow", id="appr-details-box", body_id="appr-details")
        yield KeyFooter()

    @work(thread=True, exclusive=True, group="approvals", exit_on_error=False)
    def load(self, seq: int) -> None:
        self.fetch(seq, lambda r: r.pending_approvals(), self.show)

    def show(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self._sync()

    def shown_rows(self) -> list[dict[str, Any]]:
        """The gates the filter keeps."""
        return [r for r in self.rows if gate_matches(r, self.filter_words)]

    def _sync(self) -> None:
        awaiting = self.kapp.awaiting_replica
        self.table.sync((_key(r), _cells(r, awaiting.get(r["execution_id"])), r) for r in self.shown_rows())
        self._summary()
        self._show_details()
        self.selection_changed()

    def _summary(self) -> None:
        rows = self.shown_rows()
        n = len(rows)
        oldest = f" · oldest waiting {duration(rows[0]['waiting_s'], compact=True, clamp=True)}" if n else ""
        where = (
            f" matching {' '.join(self.filter_words)} (of {len(self.rows)}; esc clears)" if self.filter_words else ""
        )
        marked = f" · {len(self.table.marks)} marked" if self.table.marks else ""
        more = self.table.sort_note() + self.table.more_hint()
        self.query_one("#appr-summary", Static).update(
            Text(
                f"{n} approval gate{'s' if n != 1 else ''} waiting for a decision{where}{oldest}{marked}{more}",
                style="bold magenta" if n else "dim",
            )
        )

    def on_live_table_clipped(self, event: LiveTable.Clipped) -> None:
        self._summary()

    def on_live_table_sorted(self, event: LiveTable.Sorted) -> None:
        self._summary()

    def action_sort_next(self) -> None:
        self.table.sort_next()

    def action_sort_reverse(self) -> None:
        self.table.sort_reverse()

    def _show_details(self) -> None:
        self.query_one(DetailsBox).show_cursor_row(self.table, _details, "no gate selected")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_details()
        self.selection_changed()

    def action_rows(self) -> list[dict[str, Any]]:
        return [
            {"id": r["execution_id"], "status": "waiting", "pending_gate": r["step_id"]}
            for r in (self.table.rows_data[k] for k in self.table.chosen() if k in self.table.rows_data)
        ]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        from .detail import DetailScreen

        event.stop()
        row = self.table.rows_data.get(event.row_key.value or "")
        if row is not None:
            self.app.push_screen(DetailScreen(int(row["execution_id"])))

    def action_mark(self) -> None:
        self.table.toggle_mark()
        self.table.action_cursor_down()
        self._summary()

    def action_clear(self) -> None:
        """esc: close the filter line, else clear the marks, else the filter."""
        if self.close_filter_line():
            pass
        elif self.table.marks:
            self.table.clear_marks()
        elif self.filter_words:
            self.filter_words = []
            self._sync()
            self.table.cursor_lost = None  # the operator changed what is listed
        self._summary()
        self.selection_changed()

    def filter_text(self) -> str:
        return " ".join(self.filter_words)

    def read_filter(self, text: str) -> list[str]:
        return words_of(text)

    def filter_applied(self, wanted: list[str]) -> None:
        self.filter_words = wanted
        self._sync()
        self.table.cursor_lost = None  # the operator changed what is listed
        self._summary()
        self._show_details()
        self.selection_changed()

    def cursor_table(self) -> LiveTable:
        return self.table

    def describe_row(self, key: str | None) -> str:
        row = self.table.rows_data.get(key or "")
        if row is None:
            eid, _, step = (key or "").partition(":")
            return f"gate {step!r} of execution {eid}"
        return f"gate {row['step_id']!r} of execution {row['execution_id']}"

    def current_status(self, target: Target) -> str | None:
        return "waiting" if f"{target.execution_id}:{target.step_id}" in self.table.rows_data else None

    def targets(self) -> list[Target]:
        out = []
        for key in self.table.chosen():
            r = self.table.rows_data[key]
            out.append(Target(int(r["execution_id"]), r["workflow_name"], "waiting", step_id=r["step_id"]))
        return out

    def action_approve(self) -> None:
        self.act("approve", self.targets())

    def action_reject(self) -> None:
        self.act("reject", self.targets())

    def after_action(self, outcome: ActionOutcome) -> None:
        self.table.acted_on(f"{t.execution_id}:{t.step_id}" for t in outcome.done)
        self.table.clear_marks()
        self._summary()


def _details(row: dict[str, Any]) -> Group:
    """The gate whole: its execution, workflow and id, then the details it carries."""
    head = Text(
        f"execution {row['execution_id']} · {visible(row['workflow_name'])} · gate {row['step_id']!r}\n",
        style="bold",
    )
    body = fmt.json_view(row["details"]) if row["details"] is not None else Text("no details", style="dim")
    return Group(head, body)


def _key(r: dict[str, Any]) -> str:
    return f"{r['execution_id']}:{r['step_id']}"


def _cells(r: dict[str, Any], awaiting: tuple[str, int] | None = None) -> dict[str, Any]:
    """``awaiting``: decided (or acted on) on the primary, not yet replayed by the read replica."""
    return {
        "execution": Text(str(r["execution_id"])) + behind_replica(awaiting),
        "workflow": r["workflow_name"],
        "step": r["step_id"],
        "waiting": duration(r["waiting_s"], compact=True, clamp=True),
        "since": fmt.when(r["waiting_since"], short=True),
        "deadline": fmt.when(r["deadline"], short=True) if r["deadline"] else Text("none", style="dim"),
        "details": fmt.short_json(r["details"], 60) if r["details"] is not None else "",
    }
