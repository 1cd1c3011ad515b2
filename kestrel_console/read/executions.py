"""The executions list (filters, pages), workflow names for "did you mean", and one
execution's row and checkpoints."""

from __future__ import annotations

from typing import Any

from psycopg import sql

from kestrel_core import STATUSES
from kestrel_core.db import statements_beside

from .search import TEXT_WINDOW as TEXT_WINDOW_ROWS
from .search import ExecutionFilter
from .session import ReaderSession
from .workflow_match import describe_unknown_workflow, prefix_params

SQL = statements_beside(__file__)

# The executions list shows at most this many rows per page.
MAX_LIMIT = 10_000

# Each key's condition on ``e``. The workflow filter is a case-sensitive prefix: a range on the
# (workflow_name, id) index, checked exactly by LIKE (``workflow_match.prefix_params``). A time
# window is an id range (id_bounds) and the exact times within it.
KEY_CONDITIONS = {
    "status": SQL.key_status,
    "workflow": SQL.key_workflow,
    "id": SQL.key_id,
    "key": SQL.key_key,
    "before": SQL.key_before,
    "from": SQL.key_from,
    "until": SQL.key_until,
}
WINDOW_SKEW = "5 minutes"


def search_statement(
    f: ExecutionFilter,
    *,
    limit: int | None = 50,
    offset: int = 0,
    before_id: int | None = None,
    bounds: dict[str, Any] | None = None,
    ids_only: bool = False,
) -> tuple[str, dict[str, Any]]:
    """The statement (with ``{schema}`` left to fill) and parameters of one page of ``f``.

    ``bounds``: id_bounds' row for ``f``'s time window (``from_at``, ``from_id``, ``until_at``,
    ``until_id``; None where the window is open). ``limit`` None: every row. Only conditions of keys that are set are
    written, so each plan is made for the keys at hand. ``ids_only``: the ids, workflows and
    statuses of every row selected (IDS: a bulk action's preview), ``limit`` rows at most.
    """
    if f.status is not None and f.status not in STATUSES:
        raise ValueError(f"unknown status {f.status!r}: use one of {', '.join(STATUSES)}")
    conditions: list[sql.Composable] = []
    params: dict[str, Any] = {
        "limit": None if limit is None else max(0, min(int(limit), MAX_LIMIT)),
        "offset": max(0, int(offset)),
    }

    def add(kind: str, **values: Any) -> None:
        conditions.append(sql.SQL(KEY_CONDITIONS[kind]))
        params.update(values)

    if f.id is not None:
        add("id", id=f.id)
    if f.key is not None:
        add("key", key=f.key)
    if f.status:
        add("status", status=f.status)
    if f.workflow:
        add("workflow", **prefix_params(f.workflow, exact=f.exact))
    for i, match in enumerate(f.inputs):
        name = f"input_{i}"
        conditions.append(sql.SQL(SQL.input_contains).format(documents=sql.Placeholder(name)))
        params[name] = match.documents()
    if before_id is not None:
        add("before", before_id=int(before_id))
    if bounds is not None:
        if bounds.get("from_at") is not None:
            add("from", from_id=bounds["from_id"], from_at=bounds["from_at"])
        if bounds.get("until_at") is not None:
            add("until", until_id=bounds["until_id"], until_at=bounds["until_at"])
    where = sql.SQL(SQL.condition_join).join(conditions) if conditions else sql.SQL(SQL.no_condition)
    schema = sql.SQL("{schema}")
    source: sql.Composable = sql.SQL(SQL.whole_table)
    if f.text:
        source, where = sql.SQL(SQL.text_window).format(schema=schema, where=where), sql.SQL(SQL.text_match)
        params.update(text=f.text, text_window=TEXT_WINDOW_ROWS)
    statement = sql.SQL(SQL.ids if ids_only else SQL.search).format(source=source, where=where, schema=schema)
    return statement.as_string(None), params


def bounds_params(f: ExecutionFilter) -> dict[str, Any]:
    """id_bounds' parameters for ``f``'s window (since: and from: a span ago: the later wins)."""
    start, end = f.start_moment, f.end_moment
    agos = [s for s in (f.since_s, start.ago_s if start else None) if s is not None]
    return {
        "from_at": start.at if start else None,
        "from_ago": min(agos) if agos else None,
        "until_at": end.at if end else None,
        "until_ago": end.ago_s if end else None,
        "skew": WINDOW_SKEW,
    }


class ExecutionReads(ReaderSession):
    """The list, workflow names, one execution and its steps."""

    def list_executions(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        text: str | None = None,
        limit: int = 50,
        workflow_exact: bool = False,
        offset: int = 0,
        before_id: int | None = None,
        since_s: float | None = None,
        where: ExecutionFilter | None = None,
    ) -> list[dict[str, Any]]:
        """Executions newest first, filtered by ``where`` (the filter language,
        ``read.search``) and the keys given here: status, workflow name (a prefix, or the
        whole name with ``workflow_exact``), free text (which matches the workflow name, owner,
        error text, input, step, gate and sleep ids, or the id exactly, in the newest
        ``search.TEXT_WINDOW`` executions the other keys select) and ``since_s`` (created in
        the last that many seconds).

        Page with ``before_id`` (the last id shown: cheap on any history) or ``offset``.
        """
        f = where or ExecutionFilter()
        keys: dict[str, Any] = {}
        if status is not None:
            keys["status"] = status
        if workflow:
            keys.update(workflow=workflow, exact=workflow_exact)
        if text:
            keys["text"] = text
        if since_s is not None:
            keys["since"] = f"{float(since_s)}s"
        if keys:
            f = f.merged(**keys)
        bounds = self.id_bounds(f) if f.windowed else None
        statement, params = search_statement(f, limit=limit, offset=offset, before_id=before_id, bounds=bounds)
        return self._rows("list_executions", statement, params)

    def selected(self, f: ExecutionFilter, *, limit: int) -> list[dict[str, Any]]:
        """Every execution ``f`` selects now (id, workflow_name, status, created_at), newest
        first, at most ``limit``: what a bulk action's preview freezes. Unlike the list, not
        bounded by a page (free text still looks only at its window)."""
        bounds = self.id_bounds(f) if f.windowed else None
        statement, params = search_statement(f, limit=None, bounds=bounds, ids_only=True)
        return self._rows("selected", statement, {**params, "limit": limit})

    def id_bounds(self, f: ExecutionFilter) -> dict[str, Any]:
        """``f``'s time window as ids and times (id_bounds): from_at, from_id, until_at, until_id."""
        return self._rows("id_bounds", SQL.id_bounds, bounds_params(f))[0]

    def estimate_executions(self, f: ExecutionFilter) -> int:
        """The planner's estimate of how many executions ``f`` selects (no scan: a count of a
        big history would read it all). Free text is estimated for its window."""
        bounds = self.id_bounds(f) if f.windowed else None
        statement, params = search_statement(f, limit=None, bounds=bounds)
        plan = self._rows("estimate", SQL.explain_json + statement, params)[0]["QUERY PLAN"]
        return int(plan[0]["Plan"]["Plan Rows"])

    def workflow_names(self) -> list[str]:
        """Every workflow name with executions (live or finished) or registered by a worker."""
        return [r["workflow_name"] for r in self._rows("workflow_names", SQL.workflow_names)]

    def unknown_workflow(self, prefix: str) -> str | None:
        """None if some known workflow name starts with ``prefix``; else the sentence to show:
        ``no workflow named 'x'; did you mean remediate-incident?`` (closest names, if any)."""
        return describe_unknown_workflow(prefix, self.workflow_names())

    def execution(self, execution_id: int) -> dict[str, Any] | None:
        """Every column of one execution (plus age_s, duration_s), or None."""
        rows = self._rows("execution", SQL.execution, {"id": execution_id})
        return rows[0] if rows else None

    def brief(self, execution_id: int) -> dict[str, Any] | None:
        """id, workflow and status of one execution (None: pruned), as a link names it."""
        rows = self._rows("brief", SQL.brief, {"id": execution_id})
        return rows[0] if rows else None

    def steps(self, execution_id: int) -> list[dict[str, Any]]:
        """The execution's checkpoints (finished steps and decided waits), in start order."""
        return self._rows("steps", SQL.steps, {"id": execution_id})
