"""Rendering of the engine's SQL for one schema.

The engine's statements are module-level constants written for ``psycopg.sql.SQL.format``:
they name tables as ``{schema}.table`` and paste shared fragments by name
(``{claim_is_current}``, ``{async_commit}``, ``{live_statuses}``...: ``fragments``); literal braces
are written ``{{`` ``}}``. The schema is configuration, never user data: it is validated as a
plain identifier and composed as ``sql.Identifier``. Each (statement, schema) pair is composed
once per process and cached, so the hot path never re-composes; every value travels as a bound
parameter.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import sql

from kestrel_core.base.errors import InvalidArgument
from kestrel_core.base.statuses import LIVE_STATUSES, STATUSES, TERMINAL_STATUSES, sql_array, sql_list

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def check_schema_name(schema: str) -> str:
    """Return ``schema`` if it is a plain Postgres identifier, else raise ValueError."""
    if not isinstance(schema, str) or not _IDENTIFIER.match(schema):
        raise InvalidArgument(
            f"invalid schema name {schema!r}: use letters, digits and underscores, "
            "starting with a letter or underscore (at most 63 characters)"
        )
    return schema


def quote_identifier(name: str) -> str:
    """Double-quote a validated identifier (no connection needed)."""
    return sql.Identifier(check_schema_name(name)).as_string(None)


# Pasted as {async_commit}, this makes its (autocommit) transaction commit without waiting for
# the WAL flush. Used only where losing the write in a server crash is harmless: attempt
# bookkeeping, heartbeats, sweeps (redone next time), worker registration. Claims, checkpoints,
# waits and completions always commit durably; a later durable commit also flushes these.
ASYNC_COMMIT = "(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit"


# The fence, pasted as {claim_is_current}. A write made under a claim (owner_id, claim_epoch)
# succeeds only while that claim is still the row's current one, the row is running and its
# deadline (if any) has not passed: a swept, cancelled, reclaimed or timed-out worker (even one
# reclaiming under the same id) writes nothing, also before a deadline sweep got to it. Every
# advancing write uses it (the group commit's boundary spells the same in its fence CTE).
CLAIM_IS_CURRENT = (
    "id = %(eid)s AND owner_id = %(worker_id)s AND claim_epoch = %(claim_epoch)s AND status = 'running'"
    " AND (deadline_at IS NULL OR deadline_at > now())"
)
# Pasted as {lock_if_claim_is_current}, a CTE body: also locks the row for the statement, so a
# concurrent sweep or cancel either waits for the write or wins first.
LOCK_IF_CLAIM_IS_CURRENT = "SELECT id FROM {schema}.workflow_executions WHERE {claim_is_current} FOR NO KEY UPDATE"

# Pasted as {take_claim}: the SET list of both claims (claim.py, limited_claim.py), on the
# executions table aliased ``e``. Every claim bumps claim_epoch (the fence above), and stamps
# the worker's version of the workflow on an execution enqueued without one. Times are the
# claiming statement's: the limited claim runs it after waiting for its queue locks, and
# stamps its rate window with the same instant. The lease is counted from the row's own claim
# (clock_timestamp()), which commits with the statement (claim.py): not from the statement's start.
TAKE_CLAIM = (
    "status = 'running', owner_id = %(worker_id)s, lease_expires = clock_timestamp() + %(lease)s,"
    " claim_epoch = e.claim_epoch + 1, claims = e.claims + 1,"
    " started_at = coalesce(e.started_at, statement_timestamp()), updated_at = statement_timestamp(),"
    " version = coalesce(e.version, (%(versions)s::text[])[array_position(%(names)s::text[], e.workflow_name)])"
)

# Pasted as {claimed_input}, two columns of a claim's RETURNING on the executions table aliased
# ``e``: the input when it is small (at most CLAIM_INPUT_MAX_BYTES as stored, uncompressed), and
# whether it was left out. A claim's result must stay small: a client frozen while reading a
# claim of 5 MB inputs held the claim transaction (and its rows' locks) open (issue 43 review
# (e)); a larger input is read after the claim, outside it (runner.py, ``load_input``).
CLAIM_INPUT_MAX_BYTES = 512
CLAIMED_INPUT = (
    f"CASE WHEN pg_column_size(e.input) <= {CLAIM_INPUT_MAX_BYTES} AND pg_column_compression(e.input) IS NULL"
    " THEN e.input END AS input,"
    f" coalesce(pg_column_size(e.input) > {CLAIM_INPUT_MAX_BYTES} OR pg_column_compression(e.input) IS NOT NULL,"
    " false) AS input_later"
)

# The statuses (base/statuses.py), pasted as literals so the planner matches the partial indexes:
# ``status IN {live_statuses}``, ``status IN {terminal_statuses}``, and ``{status_order}``, every
# status as an array in the console's order (``array_position({status_order}, status)``).
STATUS_FRAGMENTS = {
    "live_statuses": sql_list(LIVE_STATUSES),
    "terminal_statuses": sql_list(TERMINAL_STATUSES),
    "status_order": sql_array(STATUSES),
}
# Pasted as {queue_is_limited}, on the queues table aliased ``q``: a queue with a limit
# (concurrency, per worker, rate) or keyed executions, which only the limited claim serves.
QUEUE_IS_LIMITED = "(q.keyed OR q.concurrency IS NOT NULL OR q.per_worker IS NOT NULL OR q.rate_limit IS NOT NULL)"
# Pasted as {ready_row_is_current}: what a claim takes is checked against the execution itself
# (``e``), not the ready row it came by (``taken``, the deleted row): the execution is enqueued,
# of a workflow and version this worker has (the names and versions parameters), and
# exactly as the ready row says (claim key, workflow, queue, version, concurrency key). A ready
# row left behind by a claim that rolled back while a cancel went on (the trigger skips locked
# rows) names the execution as it was: after a requeue or a sweep it differs, and claims nothing.
READY_ROW_IS_CURRENT = (
    "e.status = 'enqueued' AND e.workflow_name = ANY(%(names)s::text[])"
    " AND (e.version IS NULL"
    " OR e.version = (%(versions)s::text[])[array_position(%(names)s::text[], e.workflow_name)])"
    " AND -e.priority::bigint = taken.neg_priority AND e.run_at = taken.run_at"
    " AND e.workflow_name = taken.workflow_name AND e.queue = taken.queue"
    " AND e.version IS NOT DISTINCT FROM taken.version"
    " AND e.concurrency_key IS NOT DISTINCT FROM taken.concurrency_key"
)
# Pasted as {version_matches}, on executions_ready aliased ``r``: the row is of a version this
# worker has (the names and versions parameters are parallel arrays; a NULL version is any).
VERSION_MATCHES = (
    "(r.version IS NULL OR r.version = (%(versions)s::text[])[array_position(%(names)s::text[], r.workflow_name)])"
)
# Pasted as {worker_is_live}, on the workers table aliased ``w``: the worker has not stopped and
# beat within the last ``dead_after`` seconds (a parameter: how long a silent worker still counts).
WORKER_IS_LIVE = "(w.stopped_at IS NULL AND w.last_heartbeat > now() - make_interval(secs => %(dead_after)s))"

# The prefix of the LISTEN/NOTIFY channel, ``kestrel:<schema>``. In SQL the channel is the
# schema's function ``notify_channel()`` (migration 0009), which the functions that wake
# workers call; tests/core/test_statements.py checks the two agree.
CHANNEL_PREFIX = "kestrel:"


@lru_cache(maxsize=64)
def fragments(schema: str) -> dict[str, sql.Composable]:
    """The named fragments for one schema, composed once."""
    ident = sql.Identifier(check_schema_name(schema))
    claim = sql.SQL(CLAIM_IS_CURRENT)
    return {
        "schema": ident,
        "claim_is_current": claim,
        "lock_if_claim_is_current": sql.SQL(LOCK_IF_CLAIM_IS_CURRENT).format(schema=ident, claim_is_current=claim),
        "async_commit": sql.SQL(ASYNC_COMMIT),
        "take_claim": sql.SQL(TAKE_CLAIM),
        "ready_row_is_current": sql.SQL(READY_ROW_IS_CURRENT),
        "claimed_input": sql.SQL(CLAIMED_INPUT),
        "queue_is_limited": sql.SQL(QUEUE_IS_LIMITED),
        "version_matches": sql.SQL(VERSION_MATCHES),
        "worker_is_live": sql.SQL(WORKER_IS_LIVE),
        **{name: sql.SQL(text) for name, text in STATUS_FRAGMENTS.items()},
    }


@lru_cache(maxsize=1024)
def render(statement: str, schema: str) -> sql.SQL:
    """The statement composed for ``schema`` (its named fragments filled), cached."""
    composed = sql.SQL(statement).format(**fragments(schema))
    return sql.SQL(composed.as_string(None))


@lru_cache(maxsize=64)
def render_migration(text: str, schema: str) -> sql.SQL:
    """A migration file composed for ``schema``.

    Migration files are frozen once applied and use braces freely in PL/pgSQL, so they are not
    format strings: only their ``{schema}`` markers are composed, as ``sql.Identifier``.
    """
    ident = sql.Identifier(check_schema_name(schema))
    parts: list[sql.Composable] = []
    for i, piece in enumerate(text.split("{schema}")):
        if i:
            parts.append(ident)
        parts.append(sql.SQL(piece))
    return sql.SQL(sql.Composed(parts).as_string(None))


def notify_channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel on which enqueues and wake-ups are announced."""
    return CHANNEL_PREFIX + check_schema_name(schema)


def one_row(row: tuple[Any, ...] | None, statement: str) -> tuple[Any, ...]:
    """The row a statement always returns (a FROM-less SELECT, an upsert, an aggregate).
    Missing, it is an engine error (the caller unwinds and the execution is retried), checked
    also under ``python -O``, where an ``assert`` would vanish."""
    if row is None:
        raise psycopg.InternalError(f"{statement} returned no row")
    return row
