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
from ..pausable_list import PausableList
from ..widgets.banner import Banner
from ..widgets.live_table import Column, LiveTable

COLUMNS = [
    Column("queue"),
    Column("state"),
    Column("enqueued"),
    Column("running", "running/limit"),
    Column("per_worker", "per worker"),
    Column("rate", "rate (window)"),
    Column("per_key", "per key"),
    Column("priority"),
    Column("workers"),
    Column("workflows"),
]


class QueuesScreen(PausableList, LiveScreen):
    VIEW = "queues"
    NAME = "Queues"
    KIND = "queue"
    BINDINGS: ClassVar[list[Any]] = [
        # Not p: p pauses the refresh on every screen, a harmless key must not pause production.
        Binding(PAUSE_KEY, "toggle_paused", "Pause/resume queue"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Banner()
        yield Static("", id="queues-summary")
        yield LiveTable(COLUMNS, id="queues")
        yield Footer()

    @work(thread=True, exclusive=True, group="queues", exit_on_error=False)
    def load(self, seq: int) -> None:
        self.fetch(seq, lambda r: r.queues(), self.show)

    def cells(self, row: dict[str, Any]) -> dict[str, Any]:
        return _cells(row)

    def summarize(self) -> None:
        paused = self.paused_count()
        self.query_one("#queues-summary", Static).update(
            Text(
                self.counted() + " · limits hold across all workers" + self.table.more_hint(),
                style="bold yellow" if paused else "dim",
            )
        )

    def pause_question(self, row: dict[str, Any], pause: bool) -> str:
        effect = (
            "Workers stop claiming from it; running executions finish." if pause else "Workers claim from it again."
        )
        return (
            f"{'Pause' if pause else 'Resume'} queue {row['name']!r}?\n{effect} "
            f"Recorded as {self.kapp.config.operator!r}."
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
