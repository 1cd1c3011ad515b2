"""Least-privilege roles: one for workers, one for operators, one for the console's ad-hoc SQL.

Three NOLOGIN group roles, meant to be granted to login users (``GRANT kestrel_worker TO app``):

- the worker role runs workflows and enqueues them: it reads the tables and inserts and
  updates what the engine writes (claims, checkpoints, attempts, parked waits, its ``workers``
  row, queue and schedule declarations), uses the schema's identity sequences, and calls the
  engine's SECURITY DEFINER functions (the wait sweep, pruning, events, adding a schedule:
  a schedule enqueues any workflow with any input at every tick). What only
  operators decide is out of its reach, by the database itself: no column of a decision
  (``workflow_waits.decision``, ``decided_by``, ...) and no ``paused`` column of a queue or
  schedule is granted to it (column privileges), and the trigger
  ``guard_finished_executions`` (migration 0013) refuses its plain UPDATEs that cancel an
  execution or change a finished one; those of migration 0024 what the columns it needs
  would still allow (leaving 'waiting', resolving a wait, a decided gate, a live execution
  taken out of the ready queue, a closed attempt, a disguised pause), and audit its queue and
  schedule declarations (the table ``declarations``). It deletes nothing directly but ready
  rows (the claim), creates nothing.
- the operator role reads every table of the schema, and changes things only through the
  SECURITY DEFINER functions that check the allowed states and write the audit row
  (``OPERATOR_FUNCTIONS``). It cannot INSERT, UPDATE or DELETE any table directly, nor
  enqueue, nor add a schedule (the worker role's: see above).
- the reader role (``kestrel_reader``) has USAGE on the schema and SELECT on its tables, and
  nothing else: no sequence, no function of ours but ``explain_lines`` (``READER_FUNCTIONS``:
  SECURITY INVOKER, it runs an EXPLAIN as its caller and sizes its lines on the server).
  The console's ad-hoc SQL and saved reports run as it (``SET LOCAL ROLE``) when the login
  may assume it (layer 3 of the SQL guard).
  The operator role is a member of it, so every operator login may. When a superuser runs
  ``ensure_roles``, the reader role is also granted ``SET`` on ``temp_file_limit`` (a
  superuser-only setting, unlimited by default), so the console can lower it for each query.

Column privileges are checked once per statement and the trigger's WHEN clause is a
comparison of the old and new status: the worker's hot path pays nothing it would notice
("Least privilege" in docs/operations.md has the figures).

``EXECUTE`` on the schema's functions is revoked from PUBLIC, so holding USAGE on the schema
is not enough to call them. Every grant and revoke names Kestrel's own tables (those its
migrations create, and their partitions), their sequences and its functions (one file each),
one by one: what else lives in the schema keeps its privileges (``migrate`` refuses a schema
that holds other objects to begin with). A new role's grants go in ``_grant``'s lists
(``WORKER_WRITES``, ``WORKER_FUNCTIONS``, ``OPERATOR_FUNCTIONS``) or beside them.

Roles are cluster-wide; privileges are per database and schema, so
run ``ensure_roles`` (``migrate`` does) in every database and schema Kestrel uses, and again
after every migration (new tables get their grants then).

Idempotent and safe to run from many processes at once: the grants run under the migration
advisory lock, and a role created by a concurrent process between our check and our CREATE
counts as created.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import psycopg
from psycopg import sql

from kestrel_core.base.errors import ActionRefused, InvalidArgument, SchemaOutdated
from kestrel_core.base.masking import first_line
from kestrel_core.db.migrate import function_files, is_kestrel_relation, kestrel_relations
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import check_schema_name

SQL = statements_beside(__file__)

DEFAULT_WORKER_ROLE = "kestrel_worker"
DEFAULT_OPERATOR_ROLE = "kestrel_operator"
DEFAULT_READER_ROLE = "kestrel_reader"

# Parameter privileges are cluster-wide (PostgreSQL 15+); only a superuser may grant them.
READER_PARAMETERS = ("temp_file_limit",)
KESTREL_FUNCTIONS = sorted(f.name for f in function_files())

# What the worker role may do, table by table: privileges, with a column list where the
# engine writes only some columns. Tables not listed (the audit table, the console's counters,
# tables later migrations add) get no privilege at all.
_QUEUE_DECLARED = "concurrency, per_worker, rate_limit, rate_period, per_key, priority, workflows, keyed, declared_at"
# What the claim, the lease, the park, the boundary, the deadlines and the sweeps write.
_EXECUTION_RUN = (
    "status, output, error, owner_id, lease_expires, claim_epoch, claims, run_at, started_at,"
    " finished_at, updated_at, version, timeout, deadline_at"
)
_SCHEDULE_DECLARED = "cron, timezone, workflow_name, input, catch_up, next_tick, updated_at"
WORKER_WRITES: dict[str, tuple[str, ...]] = {
    # enqueue; claim, lease, park, finish: only the columns those write (never an execution's
    # workflow, input, queue, priority, keys, parent or creation: migration 0029), and the
    # triggers guard what they may become
    "workflow_executions": ("SELECT", "INSERT", f"UPDATE ({_EXECUTION_RUN})"),
    # the claim takes rows out (FOR UPDATE needs an UPDATE right); triggers put them in
    "executions_ready": ("SELECT", "UPDATE (id)", "DELETE"),
    "operation_outputs": ("SELECT", "INSERT"),  # checkpoints (ON CONFLICT DO NOTHING)
    # park (insert), reopen or wake (resolved_at); decisions only through the functions
    "workflow_waits": (
        "SELECT",
        "INSERT (execution_id, step_id, kind, wake_at, details, seq)",
        "UPDATE (resolved_at, details)",
    ),
    "step_attempts": ("SELECT", "INSERT", "UPDATE"),  # the per-step timeline
    "workers": ("SELECT", "INSERT", "UPDATE"),  # register, heartbeat, retire
    "schema_migrations": ("SELECT",),  # the version check at start
    # declare at start, mark keyed, claim (lock, rate window); never paused / paused_by
    "queues": ("SELECT", f"INSERT (name, {_QUEUE_DECLARED})", f"UPDATE ({_QUEUE_DECLARED}, rate_starts)"),
    # declare at start, advance ticks; never paused / paused_by
    "schedules": (
        "SELECT",
        f"INSERT (name, {_SCHEDULE_DECLARED}, source, created_by)",
        f"UPDATE ({_SCHEDULE_DECLARED}, last_tick, last_execution_id)",
    ),
    "workflow_events": ("SELECT",),  # wait_for_event (sent via send_event)
    "execution_keys": ("SELECT",),  # an enqueue's key already taken: its holder (a trigger writes them)
    "history_partitions": ("SELECT",),  # prune's id ranges (dropped through drop_history_range)
    # the claim's DELETE of ready rows whose executions are still enqueued at the end of its
    # statement names them here; ready_recheck() checks them at commit (migration 0024)
    "ready_rechecks": ("INSERT",),
}
WORKER_FUNCTIONS = (
    "prune_finished(timestamptz, integer, text)",
    "send_event(text, jsonb, text)",
    "lock_finished_counters(text[], text[], smallint[])",
    "count_shard(bigint)",  # the counters a step boundary locks
    "sweep_waits(integer)",
    "fold_finished_counts(integer)",  # the maintenance loop's fold of the counters
    "fold_activity(integer, integer, integer)",  # and of the dashboard's activity per minute
    "ensure_partitions(integer)",  # the history's id ranges ahead (migrate and the upkeep)
    "drop_history_range(bigint, timestamptz, text)",  # retention by partition (prune)
    "batch_ranges()",  # which ranges prune deletes from row by row (its dry run counts them)
    # A schedule enqueues its workflow at every tick: adding one needs the right to enqueue.
    "add_schedule(text, text, text, text, jsonb, boolean, timestamptz, text, text)",
)
OPERATOR_FUNCTIONS = (
    "decide_approval(bigint, text, boolean, text, text)",
    "cancel_execution(bigint, text, text)",
    "requeue_execution(bigint, text, text)",
    "fork_execution(bigint, text, jsonb, boolean, text, text, text)",
    "pause_execution(bigint, text, text)",
    "resume_execution(bigint, text, text)",
    "prune_finished(timestamptz, integer, text)",
    "drop_history_range(bigint, timestamptz, text)",
    "batch_ranges()",
    "set_queue_paused(text, boolean, text, text)",
    "set_schedule_paused(text, boolean, timestamptz, text, text)",
    "remove_schedule(text, text, text)",
    "trigger_schedule(text, text, text)",  # one run of a schedule, now (audited)
    "send_event(text, jsonb, text)",
    # bulk actions: freeze a preview, begin with its token, act chunk by chunk
    "bulk_freeze(text, jsonb, bigint[], text, text, interval)",
    "bulk_begin(text, text, text)",
    "bulk_apply_chunk(bigint, text, text, integer)",
)
# The console's EXPLAIN, its lines sized on the server (SECURITY INVOKER: it runs as the reader).
READER_FUNCTIONS = ("explain_lines(text, integer)",)


@dataclass(frozen=True)
class RoleNames:
    """The role names (configurable: several installations may share one cluster)."""

    worker: str = DEFAULT_WORKER_ROLE
    operator: str = DEFAULT_OPERATOR_ROLE
    reader: str = DEFAULT_READER_ROLE

    def __post_init__(self) -> None:
        for name in (self.worker, self.operator, self.reader):
            check_role_name(name)
        if len({self.worker, self.operator, self.reader}) != 3:
            raise InvalidArgument("the worker, operator and reader roles must have different names")


@dataclass
class RolesReport:
    """What ``ensure_roles`` did."""

    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)


def check_role_name(name: str) -> str:
    """Return ``name`` if it is a plain identifier usable as a role name, else ValueError."""
    try:
        return check_schema_name(name)
    except ValueError:
        raise InvalidArgument(
            f"invalid role name {name!r}: use letters, digits and underscores, starting with a "
            "letter or underscore (at most 63 characters)"
        ) from None


def can_create_roles(conn: psycopg.Connection) -> bool:
    """Whether the connected user may create roles (superuser or CREATEROLE)."""
    row = conn.execute(SQL.can_create_roles).fetchone()
    return bool(row and row[0])


def ensure_roles(conn: psycopg.Connection, schema: str, names: RoleNames | None = None) -> RolesReport:
    """Create the three roles if missing and (re)grant exactly their privileges on ``schema``.

    Runs in one transaction on ``conn`` (which must be in autocommit mode, as Kestrel's are).
    Needs a user that may create roles and owns the schema (the one that ran ``migrate``).
    """
    names = names or RoleNames()
    check_schema_name(schema)
    report = RolesReport()
    with conn.transaction():
        conn.execute(SQL.lock)
        if conn.execute(SQL.schema_exists, (schema,)).fetchone() is None:
            raise SchemaOutdated(
                f"the Kestrel schema {schema!r} does not exist in this database: "
                "run `kestrel-console migrate` first, then create the roles"
            )
        for role in (names.worker, names.operator, names.reader):
            (report.created if _create_role(conn, role) else report.existing).append(role)
        known = kestrel_relations()
        tables = [row[0] for row in conn.execute(SQL.schema_tables, (schema,)) if is_kestrel_relation(row[0], known)]
        report.tables = tables
        _grant(conn, schema, names, tables)
        _grant_membership(conn, names.reader, names.operator)
        _grant_reader_parameters(conn, names.reader)
    return report


def _create_role(conn: psycopg.Connection, role: str) -> bool:
    """CREATE ROLE unless it exists; True if created here."""
    row = conn.execute(SQL.role_exists, (role,)).fetchone()
    if row is not None:
        if row[0]:
            raise InvalidArgument(
                f"role {role!r} exists and can log in: Kestrel's roles are NOLOGIN groups granted "
                "to login users; choose other role names or make it NOLOGIN"
            )
        return False
    try:
        with conn.transaction():  # a savepoint: a concurrent CREATE ROLE must not abort ours
            conn.execute(sql.SQL(SQL.create_role).format(role=sql.Identifier(role)))
    except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
        return False  # created by another process meanwhile
    return True


def _grant(conn: psycopg.Connection, schema: str, names: RoleNames, tables: list[str]) -> None:
    """Grant each role its privileges on Kestrel's own objects, one by one: never on another
    application's table, sequence or function that happens to share the schema (``REVOKE ...
    ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC`` once broke every other app there)."""
    s = sql.Identifier(schema)
    worker, operator = sql.Identifier(names.worker), sql.Identifier(names.operator)
    reader = sql.Identifier(names.reader)
    every = sql.SQL("{}, {}, {}").format(worker, operator, reader)
    statements = [
        # Start from nothing, so a rerun also takes back what an older version granted.
        sql.SQL(SQL.revoke_schema).format(schema=s, roles=every),
        sql.SQL(SQL.grant_schema).format(schema=s, roles=every),
    ]
    for table in tables:
        t = sql.Identifier(schema, table)
        statements.append(sql.SQL(SQL.revoke_table).format(table=t, roles=every))
        statements.append(sql.SQL(SQL.grant_table_read).format(table=t, operator=operator, reader=reader))
    for (sequence,) in conn.execute(SQL.schema_sequences, (schema, tables)).fetchall():
        q = sql.Identifier(schema, sequence)
        statements.append(sql.SQL(SQL.revoke_sequence).format(sequence=q, roles=every))
        statements.append(sql.SQL(SQL.grant_sequence).format(sequence=q, worker=worker))
    for (signature,) in conn.execute(SQL.schema_functions, (schema, KESTREL_FUNCTIONS)).fetchall():
        # regprocedure's text: the catalog's own quoting of a name and argument types it holds.
        statements.append(sql.SQL(SQL.revoke_function).format(function=sql.SQL(signature), roles=every))
    for table, privileges in WORKER_WRITES.items():
        if table in tables:
            statements.append(
                sql.SQL(SQL.grant_worker_writes).format(
                    privileges=sql.SQL(", ").join(sql.SQL(p) for p in privileges),
                    schema=s,
                    table=sql.Identifier(table),
                    worker=worker,
                )
            )
    for role, functions in ((worker, WORKER_FUNCTIONS), (operator, OPERATOR_FUNCTIONS), (reader, READER_FUNCTIONS)):
        for signature in functions:
            name, _, args = signature.partition("(")
            if _function_exists(conn, schema, name):
                statements.append(
                    sql.SQL(SQL.grant_function).format(
                        schema=s, function=sql.Identifier(name), arguments=sql.SQL(args.rstrip(")")), role=role
                    )
                )
    for statement in statements:
        conn.execute(statement)


# A cluster-wide catalog row (a parameter's ACL) takes one update at a time: a concurrent grant
# to another role from another database fails ours with 'tuple concurrently updated' (or a
# unique violation when both create the row). Each attempt is short; 50 cover any realistic crowd.
SHARED_GRANT_ATTEMPTS = 50
SHARED_GRANT_PAUSE = 0.01  # seconds, times the attempt number


def _grant_shared(conn: psycopg.Connection, grant: sql.Composed, holds: Callable[[], bool]) -> None:
    """Run ``grant`` until ``holds()``: a lost race on a shared catalog row must not pass for a
    grant (before, it did, and the role silently lacked its privilege)."""
    for attempt in range(1, SHARED_GRANT_ATTEMPTS + 1):
        if holds():
            return
        try:
            with conn.transaction():  # a savepoint: a lost race must not abort the caller's transaction
                conn.execute(grant)
            return
        except (psycopg.errors.UniqueViolation, psycopg.errors.InternalError_):  # tuple concurrently updated
            time.sleep(SHARED_GRANT_PAUSE * attempt * random.random())
    if not holds():
        raise RuntimeError(
            f"could not run {grant.as_string(conn).strip()}: {SHARED_GRANT_ATTEMPTS} attempts lost to concurrent "
            "grants on the same cluster-wide row; run migrate again"
        )


def _grant_membership(conn: psycopg.Connection, role: str, member: str) -> None:
    """GRANT role TO member unless it holds; memberships are cluster-wide, so a concurrent
    ``ensure_roles`` in another database may grant it meanwhile: that counts as granted."""
    _grant_shared(
        conn,
        sql.SQL(SQL.grant_role).format(role=sql.Identifier(role), member=sql.Identifier(member)),
        lambda: conn.execute(SQL.is_member, (member, role)).fetchone() == (True,),
    )


def _grant_reader_parameters(conn: psycopg.Connection, reader: str) -> None:
    """Let the reader role lower the settings the console bounds each query with; skipped
    unless a superuser runs this (then the console can set only what any role may)."""
    if conn.execute(SQL.is_superuser).fetchone() != (True,):
        return
    for parameter in READER_PARAMETERS:
        _grant_shared(
            conn,
            sql.SQL(SQL.grant_set_parameter).format(parameter=sql.Identifier(parameter), role=sql.Identifier(reader)),
            partial(_may_set, conn, reader, parameter),
        )


def _may_set(conn: psycopg.Connection, role: str, parameter: str) -> bool:
    return conn.execute(SQL.has_parameter_privilege, (role, parameter)).fetchone() == (True,)


def _function_exists(conn: psycopg.Connection, schema: str, name: str) -> bool:
    return conn.execute(SQL.function_exists, (schema, name)).fetchone() is not None


@contextmanager
def needs_worker_role(action: str) -> Iterator[None]:
    """Say which role an action needs when Postgres refuses it for lack of privilege (it says
    only 'permission denied for table queues')."""
    try:
        yield
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ActionRefused(
            f"cannot {action}: this login may not ({first_line(exc)}). Enqueuing, and adding a "
            f"schedule (which enqueues at every tick), needs the worker role ({DEFAULT_WORKER_ROLE} "
            "unless renamed); the operator role decides, cancels, requeues and pauses, but does not enqueue"
        ) from None
