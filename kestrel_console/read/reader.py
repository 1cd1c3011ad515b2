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

from datetime import UTC, datetime, timedelta
from typing import Any

from kestrel_core import STATUSES

from .audit import SQL as AUDIT_SQL
from .audit import AuditFilter, AuditReads
from .blockers import BlockerReads
from .dashboard import DASHBOARD_LIVE, DashboardReads
from .executions import SQL as EXECUTIONS_SQL
from .executions import ExecutionReads, bounds_params, search_statement
from .overview import ACTIVITY, QUEUE_DEPTH, STATUS_COUNTS, OverviewReads, activity_params
from .overview import SQL as OVERVIEW_SQL
from .replica import ReplicaReads
from .search import MAX_ID, ExecutionFilter, parse_filter
from .timeline import TimelineReads
from .workers import DEFAULT_BEAT_S, STUCK_LEASES, UNRUNNABLE, UNSERVED, WORKERS, WorkerReads
from .workers import SQL as WORKERS_SQL


class Reader(
    DashboardReads, OverviewReads, WorkerReads, ExecutionReads, TimelineReads, BlockerReads, AuditReads, ReplicaReads
):
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

        The free-text filter is the one exception to "O(live rows)": it reads the newest
        ``search.TEXT_WINDOW`` executions the other keys select (an index scan, never a
        sequential one).
        """
        live = {"dead_after": self.dead_after_s}
        return {
            "dashboard_live": (
                DASHBOARD_LIVE,
                {**live, "limit": 500, "recent": 3600.0, "beat": DEFAULT_BEAT_S, **activity_params(15, 60)},
            ),
            "status_counts": (STATUS_COUNTS, None),
            "queue_depth": (QUEUE_DEPTH, None),
            "stuck_leases": (STUCK_LEASES, {"limit": 500}),
            "workers": (WORKERS, {**live, "recent": 3600.0, "beat": DEFAULT_BEAT_S}),
            "unserved_workflows": (UNSERVED, live),
            "unrunnable": (UNRUNNABLE, live),
            "queues": (WORKERS_SQL.queues, live),
            "pending_approvals": (OVERVIEW_SQL.pending_approvals, {"limit": 500}),
            "approvals_summary": (OVERVIEW_SQL.approvals_summary, None),
            "errors_since": (OVERVIEW_SQL.errors_since, {"seconds": 3600}),
            "activity": (ACTIVITY, activity_params(15, 60)),
            "workflow_names": (EXECUTIONS_SQL.workflow_names, None),
            "audit": (AUDIT_SQL.audit, {**AuditFilter().params(), "limit": 100, "before_id": MAX_ID}),
            **self.search_statements(workflow=workflow, text=text),
        }

    def search_statements(
        self,
        *,
        workflow: str = "remediate",
        text: str = "upstream",
        execution_id: int = 1,
        key: str = "order-3",
        input_filter: str = "input.pod=api-7",
        limit: int = 50,
    ) -> dict[str, tuple[str, dict[str, Any] | None]]:
        """The executions list's statement for each kind of filter (named
        ``list_executions[...]``), as the Reader runs it, and id_bounds for each time window."""
        kinds = {
            "list_executions": ExecutionFilter(),
            **{f"list_executions[status={s}]": ExecutionFilter(status=s) for s in STATUSES},
            "list_executions[workflow]": ExecutionFilter(workflow=workflow),
            "list_executions[text]": ExecutionFilter(text=text),
            "list_executions[since]": ExecutionFilter(since="2h"),
            "list_executions[id]": ExecutionFilter(id=execution_id),
            "list_executions[key]": ExecutionFilter(key=key),
            "list_executions[input]": parse_filter(input_filter),
            "list_executions[status+since]": ExecutionFilter(status="success", since="2h"),
            "list_executions[status+from/until]": ExecutionFilter(status="error", start="3d", end="2d"),
            "list_executions[text+from/until]": ExecutionFilter(text=text, start="3d", end="2d"),
        }
        # No read here (the tests EXPLAIN these while holding locks): a window's ids are a
        # stand-in (0 and no upper end), its times computed on this clock; id_bounds itself is
        # listed beside it.
        out: dict[str, tuple[str, dict[str, Any] | None]] = {}
        now = datetime.now(UTC)
        for name, f in kinds.items():
            bounds = None
            if f.windowed:
                p = bounds_params(f)
                ago = p["from_ago"] or 0.0
                until = p["until_ago"]
                bounds = {
                    "from_at": now - timedelta(seconds=ago),
                    "from_id": 0,
                    "until_at": None if until is None else now - timedelta(seconds=until),
                    "until_id": MAX_ID,
                }
                out[f"{name} bounds"] = (EXECUTIONS_SQL.id_bounds, p)
            out[name] = search_statement(f, limit=limit, bounds=bounds)
        out["list_executions[next page]"] = search_statement(ExecutionFilter(), limit=limit, before_id=100_000)
        return out
