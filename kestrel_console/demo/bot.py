"""The demo's "bot operator": decides some approval gates a few seconds after they open.

Its policy, like a real auto-approver's: incidents of severity ``critical`` always wait for a
human (you, in the TUI or with ``kestrel-console approve``); otherwise a low- or medium-risk
fix is approved and a high-risk one rejected. It acts through ``Kestrel.approve`` / ``reject``
with ``by="demo-bot"``, so its decisions are audited like anyone's.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import psycopg

from kestrel_core import Kestrel, KestrelError
from kestrel_core.db import render, statements_beside

from .background import BackgroundLoop

SQL = statements_beside(__file__)

BOT_NAME = "demo-bot"
LEFT_FOR_HUMANS = "critical"


class BotOperator(BackgroundLoop):
    """A thread that decides the open gates its policy covers, every ``interval`` seconds."""

    thread_name = "kestrel-demo-bot"

    def __init__(
        self,
        app: Kestrel,
        workflow: str,
        on_event: Callable[[str], None],
        *,
        min_age: float = 4.0,
        interval: float = 1.0,
    ) -> None:
        super().__init__(app, on_event)
        self.workflow = workflow
        self.min_age = min_age
        self.interval = interval
        self.decided = 0

    def decide_due(self) -> int:
        """Decide every gate due now; returns how many were decided."""
        with self.app.connection() as conn:
            gates = conn.execute(
                render(SQL.pending_gates, self.app.schema),
                {
                    "workflow": self.workflow,
                    "left_for_humans": LEFT_FOR_HUMANS,
                    "min_age": timedelta(seconds=self.min_age),
                },
            ).fetchall()
        count = 0
        for execution_id, step_id, risk in gates:
            if self._stop.is_set():
                break
            try:
                if risk == "high":
                    self.app.reject(
                        execution_id, step_id, by=BOT_NAME, comment="high-risk change: needs a change-advisory review"
                    )
                    verb = "rejected"
                else:
                    self.app.approve(
                        execution_id,
                        step_id,
                        by=BOT_NAME,
                        comment=f"{risk or 'unknown'} risk, dry run clean: auto-approved",
                    )
                    verb = "approved"
            except KestrelError:
                continue  # decided meanwhile (by you, or cancelled): nothing to do
            count += 1
            self.decided += 1
            self.on_event(f"{BOT_NAME} {verb} #{execution_id} {step_id} ({risk} risk)")
        return count

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.decide_due()
            except (KestrelError, psycopg.Error) as exc:
                self.on_event(f"{BOT_NAME}: {str(exc).strip()}")
