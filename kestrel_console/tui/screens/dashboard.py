"""Screen 1, the dashboard: queue depth per status and per workflow, activity sparklines,
stuck leases, workers, pending approvals and recent errors, all from one snapshot. A count
opens the Executions list it counts (enter or a click)."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Header, Sparkline, Static

from kestrel_core import STATUSES

from ... import formatting as fmt
from ...humanize import duration
from ...read.workers import live_versions_text
from ...safe_text import visible
from ..filters import ExecutionFilter
from ..live import PAUSE_KEY, LiveScreen
from ..operator import ActionOutcome, Target
from ..state_actions import STATE_BINDINGS, StateActions
from ..widgets.banner import Banner
from ..widgets.count_line import CountLine
from ..widgets.footer import KeyFooter
from ..widgets.live_table import Column, LiveTable

ACTIVITY_MINUTES = 15
NARROW_BELOW = 120
STOPPED_ROW = "stopped"
# The counts panel: its narrowest widths (one column, two columns), border and padding, and the
# gap between its two columns when narrow (dashboard.tcss).
COUNTS_MIN_WIDTH = {1: 42, 2: 30}
COUNTS_FRAME = 4
COUNTS_GAP = 1
WORKER_STYLES = {"alive": "green", "late": "bold yellow", "silent": "bold red"}
ACTIVITY_SERIES = (("enqueued", "enqueued"), ("started", "started"), ("completed", "completed"), ("failed", "failed"))
DEPTH_COLUMNS = [Column("workflow"), *(Column(s) for s in STATUSES)]
# Below NARROW_BELOW columns the stuck-lease and worker panels keep their ``narrow`` columns.
STUCK_COLUMNS = [
    Column("id", narrow=True),
    Column("workflow"),
    Column("owner", narrow=True),
    Column("expired", "lease expired", narrow=True),
    Column("heartbeat", "owner heartbeat"),
]
WORKER_COLUMNS = [
    Column("worker", narrow=True),
    Column("host"),
    Column("held", "held/slots", narrow=True),
    Column("heartbeat"),
    Column("state", narrow=True),
    Column("workflows"),
]


class DashboardScreen(StateActions, LiveScreen):
    VIEW = "dashboard"
    NAME = "Dashboard"
    # On the stuck-leases panel: the execution under its cursor (an expired lease may be
    # re-enqueued at once, or cancelled).
    BINDINGS: ClassVar[list[Any]] = [
        *STATE_BINDINGS,
    ]
    HELP_EXTRA = [
        (
            "enter",
            "on a stuck lease: open that execution; on a count (by status, or a workflow's in"
            " Queue depth; a click too): the Executions list of what it counts",
        ),
        ("tab / shift+tab", "move between the tables"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data: dict[str, Any] | None = None
        self.counts: dict[str, int] = {}
        self.elapsed_ms: list[float] = []  # query time of each refresh (the responsiveness budget)

    def compose(self) -> ComposeResult:
        yield Header()
        yield Banner()
        with Horizontal(id="dash-top"):
            with Vertical(id="dash-counts"):
                for status in STATUSES:
                    yield CountLine(status, id=f"count-{status}", classes="count")
                yield Static("", id="dash-approvals", classes="summary")
                yield Static("", id="dash-errors", classes="summary")
            with Vertical(id="dash-activity"):
                for key, label in ACTIVITY_SERIES:
                    with Horizontal(classes="spark-row"):
                        yield Static(label, classes="spark-label")
                        yield Sparkline([], id=f"spark-{key}", classes=f"spark spark-{key}")
                        yield Static("", id=f"spark-total-{key}", classes="spark-total")
        yield LiveTable(DEPTH_COLUMNS, id="dash-depth")
        with Horizontal(id="dash-bottom"):
            yield LiveTable(STUCK_COLUMNS, id="dash-stuck")
            yield LiveTable(WORKER_COLUMNS, id="dash-workers")
        yield Static("", id="dash-unserved")
        yield Static("", id="dash-stats")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#dash-counts").border_title = "Executions by status"
        self.query_one("#dash-activity").border_title = f"Activity · last {ACTIVITY_MINUTES} min, per minute"
        depth = self.query_one("#dash-depth", LiveTable)
        depth.border_title = "Queue depth by workflow (enter on a count lists them)"
        depth.cursor_type = "cell"  # a count, not a row: enter opens the executions it counts
        self.query_one("#dash-stuck").border_title = "Stuck leases (lease expired)"
        self.query_one("#dash-workers").border_title = "Workers"

    def on_resize(self, event: events.Resize) -> None:
        """Below NARROW_BELOW columns: counts in two columns, one line per activity series, and
        the stuck-lease and worker panels keep their essential columns (enter shows the rest)."""
        narrow = event.size.width < NARROW_BELOW
        self.set_class(narrow, "-narrow")
        if self.counts:
            self._fit_counts(max(len(s) for s in STATUSES) + 1 + max(len(fmt.count(n)) for n in self.counts.values()))
        changed = [self.query_one(f"#{name}", LiveTable).set_narrow(narrow) for name in ("dash-stuck", "dash-workers")]
        if any(changed) and self.data is not None:
            self._show_stuck(self.data["stuck_leases"])
            self._show_workers(self.data["workers"])

    @work(thread=True, exclusive=True, group="dashboard", exit_on_error=False)
    def load(self, seq: int) -> None:
        self.fetch(seq, lambda r: r.dashboard(minutes=ACTIVITY_MINUTES, bucket_s=60), self.show)

    def show(self, data: dict[str, Any]) -> None:
        self.data = data
        self.counts = dict(data["status_counts"])
        self.elapsed_ms.append(float(data["elapsed_ms"]))
        width = max(len(fmt.count(n)) for n in self.counts.values())
        label_w = max(len(s) for s in STATUSES)
        for status in STATUSES:
            line = Text(f"{status:<{label_w}}", style=fmt.STATUS_STYLES[status])
            line.append(f" {fmt.count(self.counts[status]):>{width}}")
            self.query_one(f"#count-{status}", Static).update(line)
        self._fit_counts(label_w + 1 + width)
        approvals = data["approvals_summary"]
        pending = int(approvals["count"] or 0)
        oldest = f" · oldest waiting {duration(approvals['oldest_age_s'], compact=True, clamp=True)}" if pending else ""
        self.query_one("#dash-approvals", Static).update(
            Text(f"approvals pending {fmt.count(pending)}{oldest}", style="bold magenta" if pending else "dim")
        )
        errors = int(data["errors_last_hour"])
        self.query_one("#dash-errors", Static).update(
            Text(f"errors in the last hour {fmt.count(errors)}", style="bold red" if errors else "dim")
        )
        self._show_activity(data["activity"])
        self._show_depth(data["queue_depth"])
        self._show_stuck(data["stuck_leases"])
        self._show_workers(data["workers"])
        unserved = data.get("unserved_workflows") or []
        unrunnable = data.get("unrunnable") or []
        lines = held_lines(data.get("paused_queues") or [], self.counts.get("paused", 0))
        lines += [
            f"⚠ {fmt.count(u['enqueued'])} enqueued {visible(repr(u['workflow_name']))} for "
            f"{duration(u['oldest_age_s'], compact=True, clamp=True)} (since last enqueued): "
            "no live worker has registered this workflow"
            for u in unserved
        ]
        lines += [
            f"⚠ {fmt.count(u['enqueued'])} enqueued {visible(repr(u['workflow_name']))} cannot run: needs version "
            f"{visible(str(u['version']))}, "
            f"live workers have {visible(live_versions_text(u['live_versions']))}"
            for u in unrunnable
        ]
        self.query_one("#dash-unserved").display = bool(lines)  # no blank line when all is well
        self.query_one("#dash-unserved", Static).update(Text("\n".join(lines), style="yellow"))
        self.query_one("#dash-stats", Static).update(
            Text(f"refresh: {len(self.elapsed_ms)} · queries took {data['elapsed_ms']:.1f} ms", style="dim")
        )

    def _fit_counts(self, cell: int) -> None:
        """The counts panel as wide as its longest "status count" line needs (two per row when
        narrow): a 6-digit count is never wrapped out of sight (its line is one row high)."""
        panel = self.query_one("#dash-counts")
        columns = 2 if self.has_class("-narrow") else 1
        wanted = max(COUNTS_MIN_WIDTH[columns], columns * cell + (columns - 1) * COUNTS_GAP + COUNTS_FRAME)
        if panel.styles.width is None or panel.styles.width.value != wanted:
            panel.styles.width = wanted

    def _show_activity(self, buckets: list[dict[str, Any]]) -> None:
        for key, _ in ACTIVITY_SERIES:
            series = [float(b[key]) for b in buckets]
            self.query_one(f"#spark-{key}", Sparkline).data = series
            last = int(series[-1]) if series else 0
            self.query_one(f"#spark-total-{key}", Static).update(
                f"{fmt.count(int(sum(series))):>6} · {fmt.count(last)} now"
            )

    def _show_depth(self, rows: list[dict[str, Any]]) -> None:
        pivot: dict[str, dict[str, int]] = {}
        for row in rows:
            pivot.setdefault(row["workflow_name"], {})[row["status"]] = int(row["count"])
        table = self.query_one("#dash-depth", LiveTable)
        table.sync(
            (
                (name, {"workflow": name, **{s: _num(counts.get(s, 0), s) for s in STATUSES}}, counts)
                for name, counts in sorted(pivot.items())
            ),
            sort_column="workflow",
        )

    def _show_stuck(self, rows: list[dict[str, Any]]) -> None:
        self.query_one("#dash-stuck", LiveTable).sync(
            (
                str(r["id"]),
                {
                    "id": str(r["id"]),
                    "workflow": r["workflow_name"],
                    "owner": r["owner_id"] or "",
                    "expired": duration(r["expired_for_s"], compact=True, clamp=True) + " ago",
                    "heartbeat": (duration(r["owner_heartbeat_age_s"], compact=True, clamp=True) + " ago")
                    if r["owner_heartbeat_age_s"] is not None
                    else "unknown worker",
                },
                r,
            )
            for r in rows
        )

    def _show_workers(self, rows: list[dict[str, Any]]) -> None:
        """Live workers first (alive, then silent), then one row counting the stopped ones: a
        demo restarted ten times must not push the running workers out of the panel."""
        running = sorted((r for r in rows if r["stopped_at"] is None), key=lambda r: (not r["alive"], r["worker_id"]))
        stopped = [r for r in rows if r["stopped_at"] is not None]
        wanted = [
            (
                r["worker_id"],
                {
                    "worker": r["worker_id"],
                    "host": r["hostname"] or "",
                    "held": f"{r['held']}/{r['concurrency'] or '?'}",
                    "heartbeat": duration(r["heartbeat_age_s"], compact=True, clamp=True) + " ago",
                    "state": Text(r["state"], style=WORKER_STYLES.get(r["state"], "")),
                    "workflows": ", ".join(r["workflows"] or []),
                },
                r,
            )
            for r in running
        ]
        if stopped:
            wanted.append(
                (
                    STOPPED_ROW,
                    {"worker": Text(f"+ {len(stopped)} stopped", style="dim"), "state": Text("stopped", style="dim")},
                    {"stopped": stopped},
                )
            )
        table = self.query_one("#dash-workers", LiveTable)
        table.sync(wanted)
        if table.keys() != [key for key, _, _ in wanted]:  # a worker started or stopped: re-order
            table.reset()
            table.sync(wanted)

    # -- actions on the stuck-leases panel -------------------------------------------------------

    @property
    def stuck(self) -> LiveTable:
        return self.query_one("#dash-stuck", LiveTable)

    def cursor_table(self) -> LiveTable:
        return self.stuck

    def describe_row(self, key: str | None) -> str:
        return f"execution {key}"

    def action_rows(self) -> list[dict[str, Any]]:
        if not self.stuck.has_focus:
            return []  # e and c act on the stuck-leases panel only
        return [
            {"id": r["id"], "status": "running", "lease_expired": True}
            for r in (self.stuck.rows_data.get(k) for k in self.stuck.chosen())
            if r is not None
        ]

    def current_status(self, target: Target) -> str | None:
        return "running" if str(target.execution_id) in self.stuck.rows_data else None

    def targets(self) -> list[Target]:
        return [
            Target(int(r["id"]), r["workflow_name"], "running")
            for r in (self.stuck.rows_data.get(k) for k in self.stuck.chosen())
            if r is not None
        ]

    def after_action(self, outcome: ActionOutcome) -> None:
        self.stuck.acted_on(str(t.execution_id) for t in outcome.done)

    def on_descendant_focus(self) -> None:
        self.selection_changed()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.selection_changed()

    # -- counts open the list they count ----------------------------------------------------------

    async def open_list(self, status: str | None, workflow: str | None = None) -> None:
        """The Executions list showing what a count counts: that status, that workflow (its
        whole name: ``deploy`` must not also list ``deploy-canary``)."""
        from .executions import ExecutionsScreen

        await self.kapp.action_show("executions")
        screen = self.app.screen
        if isinstance(screen, ExecutionsScreen):
            screen.show_filtered(
                ExecutionFilter(status=status, workflow=workflow, exact=workflow is not None), came_from="dashboard"
            )

    # The list is opened by the app, not awaited here: a handler that waits for the app to
    # switch screens would hold the keys typed after enter (keys.py) until they gave up waiting.
    def on_count_line_open(self, event: CountLine.Open) -> None:
        self.app.call_later(self.open_list, event.status)

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        if event.data_table.id != "dash-depth" or event.cell_key.row_key.value is None:
            return
        column = event.cell_key.column_key.value
        self.app.call_later(self.open_list, column if column in STATUSES else None, event.cell_key.row_key.value)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "dash-stuck" and event.row_key.value:
            from .detail import DetailScreen

            self.app.push_screen(DetailScreen(int(event.row_key.value)))


def held_lines(paused_queues: list[dict[str, Any]], paused_executions: int) -> list[str]:
    """What operators hold: each paused queue (who, since when, how many it holds back) and
    the executions paused one by one, as the dashboard's warning lines."""
    lines = [
        f"⏸ queue {visible(repr(q['name']))} paused by {visible(q['paused_by'] or '?')} "
        f"{duration(q['paused_for_s'], compact=True, clamp=True)} ago: {fmt.count(q['enqueued'])} enqueued held"
        f" (6 Queues, {PAUSE_KEY} resumes)"
        for q in paused_queues
    ]
    if paused_executions:
        lines.append(
            f"⏸ {fmt.count(paused_executions)} execution{'s' if paused_executions != 1 else ''} paused"
            " (enter on the paused count lists them)"
        )
    return lines


def _num(n: int, status: str) -> Text:
    return Text(fmt.count(n), style=fmt.STATUS_STYLES[status] if n else "dim")
