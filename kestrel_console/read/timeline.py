"""One execution's history: every step attempt and wait on one time axis, and the operator
actions taken on it."""

from __future__ import annotations

from typing import Any

from kestrel_core.db import statements_beside

from .session import ReaderSession

SQL = statements_beside(__file__)


class TimelineReads(ReaderSession):
    """An execution's timeline and audit rows."""

    def timeline(self, execution_id: int) -> list[dict[str, Any]]:
        """Every step attempt and every wait of one execution, ordered by start.

        kind is 'step', 'sleep', 'approval', 'child' or 'event' (WaitKind); for steps outcome is
        an AttemptOutcome (running, success, error, cancelled, abandoned), for waits a WaitState
        (waiting, woke, approved, rejected, timed_out or cancelled). audited is False for an
        approval or rejection no operator action records.
        """
        return self._rows("timeline", SQL.timeline, {"id": execution_id})

    def actions(self, execution_id: int) -> list[dict[str, Any]]:
        """The operator actions taken on one execution, oldest first (who claimed to act, and
        as which database role)."""
        return self._rows("actions", SQL.execution_actions, {"id": execution_id})
