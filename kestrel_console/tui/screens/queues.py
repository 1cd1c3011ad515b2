"""Screen 6, queues: depth, running against the concurrency limit, per-worker limit, rate
window use, per-key limit, priority and pause state of every queue; ``h`` (hold) pauses or
resumes the one under the cursor (after a y/n confirmation, through kestrel_core as the
--operator)."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header, Static

from ...read.queue_view import limit_text, rate_text
from ..live import PAUSE_KEY, LiveScreen
from ..widgets.banner import Banner
from ..widgets.live_table import LiveTable

COLUMNS = [
    ("queue", "queue"),
    ("state", "state"),
    ("enqueued", "enqueued"),
    ("running", "running/limit"),
    ("per_worker", "per worker"),
    ("rate", "rate (window)"),
    ("per_key", "per key"),
    ("priority", "priority"),
    ("workers", "workers"),
    ("workflows", "workflows"),
]


class QueuesScreen(LiveScreen):
    VIEW = "queues"
    NAME = "Queues"
    BINDINGS: ClassVar[list[Any]] = [
        # Not p: p pauses the refresh on every screen, a harmless key must not pause production.
        Binding(PAUSE_KEY, "toggle_paused", "Pause/resume queue"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Banner()
        yield Static("", id="queues-summary")
        yield LiveTable(COLUMNS, id="queues")
        yield Footer()

    def on_mount(self) -> None:
        self.table.focus()

    @work(thread=True, exclusive=True, group="queues", exit_on_error=False)
    def load(self, seq: int) -> None:
        self.fetch(seq, lambda r: r.queues(), self.show)

    def show(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.table.sync((r["name"], _cells(r), r) for r in rows)
        self._summary()

    def _summary(self) -> None:
        rows = self.rows
        paused = sum(1 for r in rows if r["paused"])
        self.query_one("#queues-summary", Static).update(
            Text(
                f"{len(rows)} queue{'s' if len(rows) != 1 else ''}"
                + (f" · {paused} paused" if paused else "")
                + " · limits hold across all workers"
                + self.table.more_hint(),
                style="bold yellow" if paused else "dim",
            )
        )

    def on_live_table_clipped(self, event: LiveTable.Clipped) -> None:
        self._summary()

    def action_toggle_paused(self) -> None:
        if self.pause_refused("queue"):
            return
        key = self.table.cursor_key()
        row = self.table.rows_data.get(key) if key else None
        if row is None:
            self.kapp.tell("no queue selected", severity="warning")
            return
        name, pause = row["name"], not row["paused"]
        effect = (
            "Workers stop claiming from it; running executions finish." if pause else "Workers claim from it again."
        )
        self.confirm_pause(
            "queue",
            name,
            pause,
            f"{'Pause' if pause else 'Resume'} queue {name!r}?\n{effect} Recorded as {self.kapp.config.operator!r}.",
        )


def _cells(r: dict[str, Any]) -> dict[str, Any]:
    at_limit = r["concurrency"] is not None and r["running"] >= r["concurrency"]
    return {
        "queue": r["name"],
        "state": Text(f"paused by {r['paused_by'] or '?'}", style="bold yellow")
        if r["paused"]
        else Text("active", style="green"),
        "enqueued": str(r["enqueued"]),
        "running": Text(limit_text(r["running"], r["concurrency"]), style="bold red" if at_limit else ""),
        "per_worker": str(r["per_worker"]) if r["per_worker"] is not None else "-",
        "rate": rate_text(r),
        "per_key": str(r["per_key"]),
        "priority": str(r["priority"]),
        "workers": Text(str(r["live_workers"]), style="" if r["live_workers"] else "bold red"),
        "workflows": ", ".join(r["workflows"] or []),
    }
