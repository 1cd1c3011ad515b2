"""Screen 8, the audit trail: every operator action, newest first (who acted: the name given
and the database role; on what; why); ``/`` filters it with the audit filter language
(``action:cancel by:alice id:42 since:2h`` and free text), enter opens the execution acted on."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Static

from ... import formatting as fmt
from ...read.audit import AuditFilter, parse_audit_filter
from ...safe_text import visible
from ..filter_line import FilterLine
from ..live import LiveScreen
from ..widgets.banner import Banner
from ..widgets.details_box import DetailsBox
from ..widgets.footer import KeyFooter
from ..widgets.live_table import Column, LiveTable

COLUMNS = [
    Column("id", "#"),
    Column("at"),
    Column("action"),
    Column("execution"),
    Column("step", squeeze=12),
    Column("was"),
    Column("actor", "by", squeeze=12),
    Column("db_user", "db role", squeeze=12),
    Column("comment"),
]
# The newest actions read per refresh; older ones: narrow the filter (or the CLI's --before).
PAGE = 200


class AuditScreen(FilterLine, LiveScreen):
    VIEW = "audit"
    NAME = "Audit"
    FILTER_LINE = "audit-filter"
    FILTER_REFUSED = "filter not applied: "
    BINDINGS: ClassVar[list[Any]] = [
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear", "Clear filter", show=False),
    ]
    HELP_EXTRA = [
        ("enter", "open the execution the action was taken on"),
        ("↑ ↓", "move; the action's comment and details show below"),
        ("/", "filter: action:cancel by:alice id:42 since:2h and free text (comment, name, step, role)"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.filter = AuditFilter()
        self.rows: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Banner()
        yield self.filter_input("action:cancel by:alice id:42 since:2h free text")
        yield Static("", id="audit-summary")
        yield LiveTable(COLUMNS, id="audit")
        yield DetailsBox("Comment and details", id="audit-details-box", body_id="audit-details")
        yield KeyFooter()

    @work(thread=True, exclusive=True, group="audit", exit_on_error=False)
    def load(self, seq: int) -> None:
        wanted = self.filter
        self.fetch(seq, lambda r: (wanted, r.audit(wanted, limit=PAGE)), self.show)

    def show(self, data: tuple[AuditFilter, list[dict[str, Any]]]) -> None:
        wanted, rows = data
        if wanted != self.filter:
            return  # read for a filter since replaced: the next refresh reads the new one
        self.rows = rows
        self.table.sync((str(r["id"]), _cells(r), r) for r in rows)
        self._summary()
        self._show_details()

    def _summary(self) -> None:
        n = len(self.rows)
        where = f" matching {self.filter} (esc clears)" if str(self.filter) else ""
        more = f" · the newest {PAGE} shown: narrow the filter for older ones" if n >= PAGE else ""
        self.query_one("#audit-summary", Static).update(
            Text(
                f"{fmt.count(n)} operator action{'s' if n != 1 else ''}{where}, newest first{more}"
                + self.table.more_hint(),
                style="bold" if n else "dim",
            )
        )

    def on_live_table_clipped(self, event: LiveTable.Clipped) -> None:
        self._summary()

    def _show_details(self) -> None:
        self.query_one(DetailsBox).show_cursor_row(self.table, _details, "no action selected")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_details()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        from .detail import DetailScreen

        event.stop()
        row = self.table.rows_data.get(event.row_key.value or "")
        if row is None:
            return
        if row["execution_id"] is None:
            self.kapp.tell(f"action #{row['id']} ({row['action']}) was not taken on one execution", severity="warning")
            return
        self.app.push_screen(DetailScreen(int(row["execution_id"])))

    # -- filter ---------------------------------------------------------------------------------

    def read_filter(self, text: str) -> AuditFilter:
        return parse_audit_filter(text)  # an AuditFilterError is refused by FilterLine

    def filter_applied(self, wanted: AuditFilter) -> None:
        self.filter = wanted
        self.rows = []
        self.table.sync([])
        self.refresh_data(force=True)

    def action_clear(self) -> None:
        """esc: close the filter line, else clear the filter."""
        if not self.close_filter_line() and str(self.filter):
            self.filter_applied(AuditFilter())


def _details(row: dict[str, Any]) -> Group:
    """The action whole: what, by whom (name and role), when and on what; its comment; its
    details."""
    head = Text(f"#{row['id']} {row['action']} by {visible(row['actor'])}", style="bold")
    head.append(f" (db role {visible(row['db_user'] or '?')}) at {fmt.when(row['at'])}", style="")
    if row["execution_id"] is not None:
        head.append(f" · execution {row['execution_id']} (enter opens it)", style="cyan")
    parts: list[Any] = [head]
    comment = row["comment"]
    parts.append(Text(visible(comment, newlines=True)) if comment else Text("no comment", style="dim"))
    if row["details"] is not None:
        parts.append(fmt.json_view(row["details"]))
    return Group(*parts)


def _cells(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(r["id"]),
        "at": fmt.when(r["at"], short=True),
        "action": r["action"],
        "execution": str(r["execution_id"]) if r["execution_id"] is not None else "",
        "step": r["step_id"] or "",
        "was": r["from_status"] or "",
        "actor": r["actor"],
        "db_user": r["db_user"] or "",
        "comment": (r["comment"] or "").splitlines()[0][:80] if r["comment"] else "",
    }
