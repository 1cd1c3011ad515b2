"""The executions list (filters, pages), workflow names for "did you mean", and one
execution's row and checkpoints."""

from __future__ import annotations

from typing import Any

from kestrel_core import STATUSES

from .session import ReaderSession
from .workflow_match import describe_unknown_workflow, prefix_params

# The executions list shows at most this many rows per page.
MAX_LIMIT = 10_000

# Newest first. A NULL filter is folded away by the planner (the statement is planned with its
# values, never prepared), so a status filter meets its partial index. The workflow filter is a
# case-sensitive prefix (``workflow:remediate`` finds remediate-incident): a range on the
# (workflow_name, id) index, checked exactly by LIKE (see ``workflow_match.prefix_params``).
LIST_EXECUTIONS = """
SELECT e.id, e.workflow_name, e.status, e.created_at, e.started_at, e.finished_at,
       extract(epoch FROM now() - e.created_at)::float8 AS age_s,
       extract(epoch FROM coalesce(e.finished_at, now()) - e.started_at)::float8 AS duration_s,
       e.owner_id, cur.step_id AS current_step, e.error,
       (e.status = 'running' AND e.lease_expires < now()) AS lease_expired
  FROM {schema}.workflow_executions e
  LEFT JOIN LATERAL (
        SELECT step_id FROM (
            SELECT w.step_id, w.created_at AS at FROM {schema}.workflow_waits w
             WHERE w.execution_id = e.id AND w.resolved_at IS NULL
            UNION ALL
            (SELECT a.step_id, a.started_at FROM {schema}.step_attempts a
              WHERE a.execution_id = e.id ORDER BY a.started_at DESC LIMIT 1)
        ) AS s ORDER BY at DESC LIMIT 1
  ) AS cur ON true
 WHERE (%(status)s::text IS NULL OR e.status = %(status)s::text)
   AND (%(workflow_like)s::text IS NULL
        OR (e.workflow_name >= %(workflow_from)s::text
            AND (%(workflow_to)s::text IS NULL OR e.workflow_name < %(workflow_to)s::text)
            AND e.workflow_name LIKE %(workflow_like)s::text))
   AND (%(before_id)s::bigint IS NULL OR e.id < %(before_id)s::bigint)
   AND (%(since_s)s::float8 IS NULL OR e.created_at > now() - make_interval(secs => %(since_s)s::float8))
   AND (%(text)s::text IS NULL
        OR strpos(lower(e.workflow_name), lower(%(text)s::text)) > 0
        OR strpos(lower(coalesce(e.owner_id, '')), lower(%(text)s::text)) > 0
        OR strpos(lower(coalesce(e.error, '')), lower(%(text)s::text)) > 0
        OR e.id::text = %(text)s::text
        -- the input as JSON text (a pod, an account), and the ids of its steps, gates and sleeps
        OR strpos(lower(coalesce(e.input::text, '')), lower(%(text)s::text)) > 0
        OR EXISTS (SELECT 1 FROM {schema}.step_attempts a
                    WHERE a.execution_id = e.id AND strpos(lower(a.step_id), lower(%(text)s::text)) > 0)
        OR EXISTS (SELECT 1 FROM {schema}.workflow_waits w
                    WHERE w.execution_id = e.id AND strpos(lower(w.step_id), lower(%(text)s::text)) > 0))
 ORDER BY e.id DESC
 LIMIT %(limit)s OFFSET %(offset)s
"""

# Every workflow name the console knows of: finished executions (the trigger-kept counters),
# live ones (their partial indexes), and what workers registered. For "did you mean ...?".
# The enqueued executions' names from executions_ready (narrow, kept by triggers: not one heap
# row per enqueued execution; issue 22).
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
    ) -> list[dict[str, Any]]:
        """Executions newest first, filtered by status, workflow name (a prefix, or the whole
        name with ``workflow_exact``), free text (which
        matches the workflow name, owner, error text, input, step, gate and sleep ids, or the
        id exactly) and ``since_s`` (created in the last that many seconds).

        Page with ``before_id`` (the last id shown: cheap on any history) or ``offset``.
        """
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
        params = {
            "status": status,
            **prefix_params(workflow or None, exact=workflow_exact),
            "text": (text or None),
            "before_id": before_id,
            "since_s": since_s,
            "limit": max(0, min(int(limit), MAX_LIMIT)),
            "offset": max(0, int(offset)),
        }
        return self._rows("list_executions", LIST_EXECUTIONS, params)

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
