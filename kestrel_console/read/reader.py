"""The console's canned read queries (``Reader``): the one place the CLI and the TUI read Kestrel's tables.

Every query on a refresh path stays O(live rows) on any history: live statuses are read through
the engine's partial indexes (each predicate written with a literal status so the planner can
match it), finished executions per (workflow, status) come from ``execution_counts`` (kept
exact by triggers, migration 0003), and recent finishes through ``workflow_executions_finished_idx``.
``tests/console/read/test_reader.py`` checks with EXPLAIN that none of them scans
``workflow_executions`` sequentially on a 200k-row history.

Use one ``Reader`` per thread (or per TUI view): it holds one connection and serialises calls on
it with a lock, so sharing one between threads is safe but makes them wait for each other.
"""

from __future__ import annotations

from typing import Any

from kestrel_core import STATUSES

from .blockers import BlockerReads
from .dashboard import DASHBOARD_LIVE, DashboardReads
from .executions import LIST_EXECUTIONS, WORKFLOW_NAMES, ExecutionReads
from .overview import (
    ACTIVITY,
    APPROVALS_SUMMARY,
    ERRORS_SINCE,
    PENDING_APPROVALS,
    QUEUE_DEPTH,
    STATUS_COUNTS,
    OverviewReads,
    _activity_params,
)
from .timeline import TimelineReads
from .workers import DEFAULT_BEAT_S, QUEUES, STUCK_LEASES, UNRUNNABLE, UNSERVED, WORKERS, WorkerReads
from .workflow_match import prefix_params


class Reader(DashboardReads, OverviewReads, WorkerReads, ExecutionReads, TimelineReads, BlockerReads):
    """Read-only access to one Kestrel schema for the console, on its own connection.

    The connection opens on first use (autocommit, ``application_name=kestrel-console``,
    ``statement_timeout`` set), is dropped when it breaks, and is reopened by the next call, so
    a console survives the server going away. Unreachable server: DatabaseUnavailable; a query
    slower than the timeout: ReadTimeout. Not meant to be shared between threads (calls are
    serialised by a lock if it is).
    """

    # -- for tests and EXPLAIN -------------------------------------------------------------

    def refresh_statements(
        self, *, workflow: str = "remediate", text: str = "upstream"
    ) -> dict[str, tuple[str, dict[str, Any] | None]]:
        """Every query a refresh path runs, with typical parameters (EXPLAIN-checked in tests).

        The free-text filter is the one exception to "O(live rows)": it walks the primary key
        newest first until a page is full (an index scan, never a sequential one).
        """
        live = {"dead_after": self.dead_after_s}
        first_page = {
            "status": None,
            **prefix_params(None),
            "text": None,
            "before_id": None,
            "since_s": None,
            "limit": 50,
            "offset": 0,
        }
        return {
            "dashboard_live": (
                DASHBOARD_LIVE,
                {**live, "limit": 500, "recent": 3600.0, "beat": DEFAULT_BEAT_S, **_activity_params(15, 60)},
            ),
            "status_counts": (STATUS_COUNTS, None),
            "queue_depth": (QUEUE_DEPTH, None),
            "stuck_leases": (STUCK_LEASES, {"limit": 500}),
            "workers": (WORKERS, {**live, "recent": 3600.0, "beat": DEFAULT_BEAT_S}),
            "unserved_workflows": (UNSERVED, live),
            "unrunnable": (UNRUNNABLE, live),
            "queues": (QUEUES, live),
            "pending_approvals": (PENDING_APPROVALS, {"limit": 500}),
            "approvals_summary": (APPROVALS_SUMMARY, None),
            "errors_since": (ERRORS_SINCE, {"seconds": 3600}),
            "activity": (ACTIVITY, _activity_params(15, 60)),
            "list_executions": (LIST_EXECUTIONS, first_page),
            **{f"list_executions[status={s}]": (LIST_EXECUTIONS, {**first_page, "status": s}) for s in STATUSES},
            "list_executions[workflow]": (LIST_EXECUTIONS, {**first_page, **prefix_params(workflow)}),
            "workflow_names": (WORKFLOW_NAMES, None),
            "list_executions[text]": (LIST_EXECUTIONS, {**first_page, "text": text}),
            "list_executions[next page]": (LIST_EXECUTIONS, {**first_page, "before_id": 100_000}),
            "list_executions[since]": (LIST_EXECUTIONS, {**first_page, "since_s": 7200.0}),
        }
