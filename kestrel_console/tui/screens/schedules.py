"""Screen 7, schedules: every cron schedule with its next tick, its last run and that run's
status, and why it is not ticking (paused, no worker); ``h`` (hold) pauses or resumes the one
under the cursor, ``t`` runs it once now (its workflow enqueued as a tick would), each after a
confirmation, through ``kestrel_core`` as the --operator (audited)."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header, Static

from kestrel_console.read.schedules import schedules, why_not_ticking
from kestrel_core import ActionRefused, NotFound, first_line

from ... import formatting as fmt
from ...humanize import duration
from ...safe_text import visible
from ..live import PAUSE_KEY, LiveScreen
from ..pausable_list import PausableList
from ..widgets.banner import Banner
from ..widgets.comment import CommentModal
from ..widgets.confirm import ConfirmModal
from ..widgets.live_table import Column, LiveTable

COLUMNS = [
    Column("name", "schedule"),
    Column("cron"),
    Column("timezone"),
    Column("workflow"),
    Column("next", "next tick"),
    Column("last", "last run"),
    Column("status"),
    Column("state"),
]


# Runs the schedule under the cursor once, now: means nothing else on any screen.
TRIGGER_KEY = "t"


class SchedulesScreen(PausableList, LiveScreen):
    VIEW = "schedules"
    NAME = "Schedules"
    KIND = "schedule"
    BINDINGS: ClassVar[list[Any]] = [
        Binding(PAUSE_KEY, "toggle_paused", "Pause/resume"),
        Binding(TRIGGER_KEY, "trigger", "Run now", tooltip="run the schedule once now: its workflow is enqueued"),
    ]
    HELP_EXTRA = [("↑ ↓", "move; why the schedule is not ticking shows below")]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Banner()
        yield Static("", id="sched-summary")
        yield LiveTable(COLUMNS, id="schedules")
        yield Static("", id="sched-why")
        yield Footer()

    @work(thread=True, exclusive=True, group="schedules", exit_on_error=False)
    def load(self, seq: int) -> None:
        self.fetch(seq, schedules, self.show)

    def show(self, rows: list[dict[str, Any]]) -> None:
        super().show(rows)
        self._why()

    def cells(self, row: dict[str, Any]) -> dict[str, Any]:
        return _cells(row)

    def summarize(self) -> None:
        rows = self.rows
        self.query_one("#sched-summary", Static).update(
            Text(
                self.counted() + self.table.more_hint()
                if rows
                else "no schedules: declare one with @app.schedule or add one with kestrel-console schedule add",
                style="bold" if rows else "dim",
            )
        )

    def _why(self) -> None:
        row = self.selected()
        reason = why_not_ticking(row) if row else None
        self.query_one("#sched-why", Static).update(
            Text(f"{visible(row['name'])}: {reason}", style="yellow") if row and reason else Text("")
        )

    def on_data_table_row_highlighted(self, event: Any) -> None:
        self._why()

    # -- pause / resume ---------------------------------------------------------------------

    def pause_question(self, row: dict[str, Any], pause: bool) -> str:
        effect = (
            "No tick is enqueued until it is resumed; runs already enqueued are left alone."
            if pause
            else "It ticks again from the first tick after now; the ticks missed while it was paused are not run."
        )
        return (
            f"{'Pause' if pause else 'Resume'} schedule {row['name']!r} "
            f"({row['workflow_name']}, '{row['cron']}' {row['timezone']})?\n"
            f"{effect} Recorded as {self.kapp.config.operator!r}."
        )

    # -- run once now -----------------------------------------------------------------------

    def action_trigger(self) -> None:
        """A reason, then y/n, then the schedule's workflow enqueued once (``trigger_schedule``)."""
        if self.kapp.read_only:
            self.kapp.refuse_read_only("trigger")
            return
        row = self.selected()
        if row is None:
            self.kapp.tell("no schedule selected", severity="warning")
            return
        name = row["name"]

        def with_reason(comment: str | None) -> None:
            if comment is None:  # escape
                return
            stays = (
                "It stays paused: no tick runs until it is resumed."
                if row["paused"]
                else f"Its next tick ({fmt.when(row['next_tick'])}) comes as planned."
            )
            question = (
                f"Run schedule {name!r} once now?\n"
                f"Workflow {row['workflow_name']!r} is enqueued with the schedule's input and scheduled_at = now. "
                f"{stays} Recorded as {self.kapp.config.operator!r}." + (f" Comment: {comment!r}." if comment else "")
            )

            def done(yes: bool | None) -> None:
                if yes:
                    self.perform_trigger(name, comment or None)

            self.app.push_screen(ConfirmModal(question, title=f"Run schedule {name}"), done)

        prompt = f"Reason to run schedule {name!r} now (optional):"
        self.app.push_screen(CommentModal(f"Run schedule {name}", prompt, placeholder="why"), with_reason)

    @work(thread=True, group="actions", exit_on_error=False)
    def perform_trigger(self, name: str, comment: str | None) -> None:
        try:
            execution_id = self.kapp.operator.trigger_schedule(name, comment)
        except (ActionRefused, NotFound) as exc:
            self._to_ui(self.kapp.tell, first_line(exc), severity="warning")
            return
        except Exception as exc:
            self._to_ui(self.kapp.action_failed, "trigger", exc)
            return
        self._to_ui(
            self.kapp.tell, f"triggered schedule {name!r}: execution {execution_id} (open it on Executions with :)"
        )
        self._to_ui(self.refresh_data, force=True)


def _cells(r: dict[str, Any]) -> dict[str, Any]:
    last: Text | str
    if r["last_tick"] is None:
        last, status = Text("never", style="dim"), Text("")
    else:
        last = f"{fmt.when(r['last_tick'])} #{r['last_execution_id']}"
        status = fmt.status(r["last_status"]) if r["last_status"] else Text("pruned", style="dim")
    if r["paused"]:
        state = Text(f"paused by {r['paused_by'] or '?'}", style="bold yellow")
        nxt: Any = Text("—", style="dim")
    else:
        state = Text("active", style="green") if why_not_ticking(r) is None else Text("stalled", style="bold red")
        nxt = f"{fmt.when(r['next_tick'])} (in {duration(r['next_in_s'], compact=True, clamp=True)})"
    return {
        "name": r["name"],
        "cron": r["cron"],
        "timezone": r["timezone"],
        "workflow": r["workflow_name"],
        "next": nxt,
        "last": last,
        "status": status,
        "state": state,
    }
