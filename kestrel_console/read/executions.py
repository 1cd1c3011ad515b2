"""The executions list (filters, pages), workflow names for "did you mean", and one
execution's row and checkpoints."""

from __future__ import annotations

from typing import Any

from psycopg import sql

from kestrel_core import STATUSES

from .search import TEXT_WINDOW as TEXT_WINDOW_ROWS
from .search import ExecutionFilter
from .session import ReaderSession
from .workflow_match import describe_unknown_workflow, prefix_params

# The executions list shows at most this many rows per page.
MAX_LIMIT = 10_000

# One page of executions newest first: ``{source}`` is the table (or, under free text, the
# window of it the keys select), ``{where}`` the keys' conditions (KEY_CONDITIONS, joined
# with AND). Planned with its values, never prepared: a status literal meets its partial
# index, an input document the GIN index of migration 0025, an id range the primary key
# (and only the history's ranges it overlaps). bench/README.md "Search at 10M" has the plans.
SEARCH = """
SELECT e.id, e.workflow_name, e.status, e.created_at, e.started_at, e.finished_at,
       extract(epoch FROM now() - e.created_at)::float8 AS age_s,
       extract(epoch FROM coalesce(e.finished_at, now()) - e.started_at)::float8 AS duration_s,
       e.owner_id, cur.step_id AS current_step, e.error,
       (e.status = 'running' AND e.lease_expires < now()) AS lease_expired
  FROM (SELECT e.id, e.workflow_name, e.status, e.created_at, e.started_at, e.finished_at, e.owner_id,
               e.error, e.lease_expires
          FROM {source} AS e
         WHERE {where}
         ORDER BY e.id DESC
         LIMIT %(limit)s OFFSET %(offset)s) AS e
  -- the current step of the page's rows only (joined before a sort, it was looked up for
  -- every row of a window: 3,263 lookups for a page of 100 under since:5m at 1M)
  LEFT JOIN LATERAL (
        SELECT step_id FROM (
            SELECT w.step_id, w.created_at AS at FROM {schema}.workflow_waits w
             WHERE w.execution_id = e.id AND w.resolved_at IS NULL
            UNION ALL
            (SELECT a.step_id, a.started_at FROM {schema}.step_attempts a
              WHERE a.execution_id = e.id ORDER BY a.started_at DESC LIMIT 1)
        ) AS s ORDER BY at DESC LIMIT 1
  ) AS cur ON true
 ORDER BY e.id DESC
"""
# Every row a filter selects, narrow (a bulk action's preview freezes their ids): no page.
IDS = """
SELECT e.id, e.workflow_name, e.status, e.created_at
  FROM {source} AS e
 WHERE {where}
 ORDER BY e.id DESC
 LIMIT %(limit)s
"""
WHOLE_TABLE = "{schema}.workflow_executions"
# Free text has no index (a substring of any input, error or step id: a trigram index over
# every input would cost each enqueue hundreds of index entries): it is matched in the newest
# search.TEXT_WINDOW executions the keys select, before the page, newest
# first, stopping once the page is full.
TEXT_WINDOW = """(SELECT * FROM {schema}.workflow_executions AS e
     WHERE {where}
     ORDER BY e.id DESC LIMIT %(text_window)s)"""
# The step-id EXISTS stay correlated (OFFSET 0), probed only for rows the columns did not
# match: hashed, they would read every attempt of the history to match a window of rows.
TEXT_MATCH = """(strpos(lower(e.workflow_name), lower(%(text)s::text)) > 0
        OR strpos(lower(coalesce(e.owner_id, '')), lower(%(text)s::text)) > 0
        OR strpos(lower(coalesce(e.error, '')), lower(%(text)s::text)) > 0
        OR e.id::text = %(text)s::text
        OR strpos(lower(coalesce(e.input::text, '')), lower(%(text)s::text)) > 0
        OR EXISTS (SELECT 1 FROM {schema}.step_attempts AS a
                    WHERE a.execution_id = e.id AND strpos(lower(a.step_id), lower(%(text)s::text)) > 0 OFFSET 0)
        OR EXISTS (SELECT 1 FROM {schema}.workflow_waits AS w
                    WHERE w.execution_id = e.id AND strpos(lower(w.step_id), lower(%(text)s::text)) > 0 OFFSET 0))"""
# Each key's condition on ``e``. The workflow filter is a case-sensitive prefix: a range on the
# (workflow_name, id) index, checked exactly by LIKE (``workflow_match.prefix_params``). A time
# window is an id range (ID_BOUNDS) and the exact times within it.
KEY_CONDITIONS = {
    "status": "e.status = %(status)s::text",
    "workflow": """e.workflow_name >= %(workflow_from)s::text
        AND (%(workflow_to)s::text IS NULL OR e.workflow_name < %(workflow_to)s::text)
        AND e.workflow_name LIKE %(workflow_like)s::text""",
    "id": "e.id = %(id)s::bigint",
    "key": "e.id IN (SELECT k.execution_id FROM {schema}.execution_keys AS k WHERE k.key = %(key)s::text)",
    "before": "e.id < %(before_id)s::bigint",
    "from": "e.id >= %(from_id)s::bigint AND e.created_at >= %(from_at)s::timestamptz",
    "until": "e.id < %(until_id)s::bigint AND e.created_at < %(until_at)s::timestamptz",
}
# input.x=v: the input contains one of the documents (search.InputMatch.documents).
INPUT_CONTAINS = "e.input @> ANY({documents}::jsonb[])"
NO_CONDITION = "true"

# The time window as a range of ids, from the primary key alone: ids grow with created_at
# (each is handed out at insert, created_at is its transaction's start), so a binary search
# over the ids (~24 probes of the primary key at 10M) finds the first id created at or after
# a time. The ids are searched for the window widened by ``skew`` on both sides, and the list
# keeps the exact times within: an execution is missed only when its enqueuing transaction ran
# longer than ``skew`` before inserting it. from_at / until_at: the window's ends (a span ago
# is measured on the database's clock).
ID_BOUNDS = """
WITH RECURSIVE t AS (
    SELECT greatest(%(from_at)s::timestamptz, now() - make_interval(secs => %(from_ago)s::float8)) AS from_at,
           least(%(until_at)s::timestamptz, now() - make_interval(secs => %(until_ago)s::float8)) AS until_at
), ends AS (
    SELECT coalesce((SELECT min(id) FROM {schema}.workflow_executions), 0) AS lo,
           coalesce((SELECT max(id) FROM {schema}.workflow_executions), 0) + 1 AS hi
), probe(which, at, lo, hi) AS (
    SELECT 'from', t.from_at - %(skew)s::interval, ends.lo, ends.hi FROM t, ends WHERE t.from_at IS NOT NULL
    UNION ALL
    SELECT 'until', t.until_at + %(skew)s::interval, ends.lo, ends.hi FROM t, ends WHERE t.until_at IS NOT NULL
    UNION ALL
    SELECT p.which, p.at,
           CASE WHEN r.id IS NULL OR r.id >= p.hi THEN p.lo
                WHEN r.created_at < p.at THEN r.id + 1 ELSE p.lo END,
           CASE WHEN r.id IS NULL OR r.id >= p.hi THEN (p.lo + p.hi) / 2
                WHEN r.created_at < p.at THEN p.hi ELSE r.id END
      FROM probe AS p
      LEFT JOIN LATERAL (SELECT e.id, e.created_at FROM {schema}.workflow_executions AS e
                          WHERE e.id >= (p.lo + p.hi) / 2 ORDER BY e.id LIMIT 1) AS r ON true
     WHERE p.lo < p.hi
)
SELECT t.from_at, t.until_at,
       (SELECT min(hi) FROM probe WHERE which = 'from') AS from_id,
       (SELECT min(hi) FROM probe WHERE which = 'until') AS until_id
  FROM t
"""
WINDOW_SKEW = "5 minutes"
# Prefixed to a search statement: its plan, whose row estimate stands in for a count.
EXPLAIN_JSON = "EXPLAIN (FORMAT JSON) "

# Every workflow name the console knows of: finished executions (the trigger-kept counters),
# live ones (their partial indexes), and what workers registered. For "did you mean ...?".
# The enqueued executions' names from executions_ready (narrow, kept by triggers: not one heap
# row per enqueued execution).
WORKFLOW_NAMES = """
SELECT workflow_name FROM {schema}.execution_counts WHERE n <> 0
UNION SELECT workflow_name FROM {schema}.executions_ready
UNION SELECT workflow_name FROM {schema}.workflow_executions WHERE status = 'running'
UNION SELECT workflow_name FROM {schema}.workflow_executions WHERE status = 'waiting'
UNION SELECT unnest(workflows) FROM {schema}.workers
ORDER BY 1
"""

EXECUTION = """
SELECT e.id, e.workflow_name, e.status, e.input, e.output, e.error, e.owner_id,
       e.lease_expires, e.claim_epoch, e.priority, e.run_at, e.idempotency_key, e.claims,
       e.created_at, e.updated_at, e.started_at, e.finished_at,
       extract(epoch FROM now() - e.created_at)::float8 AS age_s,
       extract(epoch FROM coalesce(e.finished_at, now()) - e.started_at)::float8 AS duration_s,
       e.parent_id, e.deadline_at,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('id', c.id, 'workflow', c.workflow_name,
                                                     'status', c.status) ORDER BY c.id), '[]')
          FROM (SELECT id, workflow_name, status FROM {schema}.workflow_executions
                 WHERE parent_id = e.id ORDER BY id LIMIT 500) AS c) AS children,
       (SELECT jsonb_build_object('id', f.origin_id, 'step', f.from_step)
          FROM {schema}.execution_forks f WHERE f.fork_id = e.id) AS forked_from,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('id', f.fork_id, 'step', f.from_step) ORDER BY f.fork_id), '[]')
          FROM (SELECT fork_id, from_step FROM {schema}.execution_forks
                 WHERE origin_id = e.id ORDER BY fork_id LIMIT 500) AS f) AS forks
  FROM {schema}.workflow_executions e WHERE e.id = %(id)s
"""

# An execution as a link names it (the detail screen's parent row).
BRIEF = """
SELECT id, workflow_name AS workflow, status FROM {schema}.workflow_executions WHERE id = %(id)s
"""

STEPS = """
SELECT step_id, output, error, started_at, created_at AS finished_at,
       extract(epoch FROM created_at - started_at)::float8 AS duration_s, attempts, owner_id
  FROM {schema}.operation_outputs WHERE execution_id = %(id)s
 ORDER BY started_at, created_at, step_id
"""


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

    ``bounds``: ID_BOUNDS' row for ``f``'s time window (``from_at``, ``from_id``, ``until_at``,
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
        conditions.append(sql.SQL(INPUT_CONTAINS).format(documents=sql.Placeholder(name)))
        params[name] = match.documents()
    if before_id is not None:
        add("before", before_id=int(before_id))
    if bounds is not None:
        if bounds.get("from_at") is not None:
            add("from", from_id=bounds["from_id"], from_at=bounds["from_at"])
        if bounds.get("until_at") is not None:
            add("until", until_id=bounds["until_id"], until_at=bounds["until_at"])
    where = sql.SQL("\n   AND ").join(conditions) if conditions else sql.SQL(NO_CONDITION)
    schema = sql.SQL("{schema}")
    source: sql.Composable = sql.SQL(WHOLE_TABLE)
    if f.text:
        source, where = sql.SQL(TEXT_WINDOW).format(schema=schema, where=where), sql.SQL(TEXT_MATCH)
        params.update(text=f.text, text_window=TEXT_WINDOW_ROWS)
    statement = sql.SQL(IDS if ids_only else SEARCH).format(source=source, where=where, schema=schema)
    return statement.as_string(None), params


def bounds_params(f: ExecutionFilter) -> dict[str, Any]:
    """ID_BOUNDS' parameters for ``f``'s window (since: and from: a span ago: the later wins)."""
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
        """``f``'s time window as ids and times (ID_BOUNDS): from_at, from_id, until_at, until_id."""
        return self._rows("id_bounds", ID_BOUNDS, bounds_params(f))[0]

    def estimate_executions(self, f: ExecutionFilter) -> int:
        """The planner's estimate of how many executions ``f`` selects (no scan: a count of a
        big history would read it all). Free text is estimated for its window."""
        bounds = self.id_bounds(f) if f.windowed else None
        statement, params = search_statement(f, limit=None, bounds=bounds)
        plan = self._rows("estimate", EXPLAIN_JSON + statement, params)[0]["QUERY PLAN"]
        return int(plan[0]["Plan"]["Plan Rows"])

    def workflow_names(self) -> list[str]:
        """Every workflow name with executions (live or finished) or registered by a worker."""
        return [r["workflow_name"] for r in self._rows("workflow_names", WORKFLOW_NAMES)]

    def unknown_workflow(self, prefix: str) -> str | None:
        """None if some known workflow name starts with ``prefix``; else the sentence to show:
        ``no workflow named 'x'; did you mean remediate-incident?`` (closest names, if any)."""
        return describe_unknown_workflow(prefix, self.workflow_names())

    def execution(self, execution_id: int) -> dict[str, Any] | None:
        """Every column of one execution (plus age_s, duration_s), or None."""
        rows = self._rows("execution", EXECUTION, {"id": execution_id})
        return rows[0] if rows else None

    def brief(self, execution_id: int) -> dict[str, Any] | None:
        """id, workflow and status of one execution (None: pruned), as a link names it."""
        rows = self._rows("brief", BRIEF, {"id": execution_id})
        return rows[0] if rows else None

    def steps(self, execution_id: int) -> list[dict[str, Any]]:
        """The execution's checkpoints (finished steps and decided waits), in start order."""
        return self._rows("steps", STEPS, {"id": execution_id})
