"""Least privilege: the worker and operator roles can do their job and nothing more, and no
message shows a password from a DSN.

Each test logs in as a real LOGIN user that was granted one of the roles (role names carry a
random suffix: roles are cluster-wide, and are dropped at the end).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from kestrel_core import Kestrel
from kestrel_core.admin import prune
from kestrel_core.db.roles import RoleNames, ensure_roles
from tests.conftest import create_database, drop_at_the_end
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
TABLES = (
    "workflow_executions",
    "operation_outputs",
    "workflow_waits",
    "step_attempts",
    "workers",
    "operator_actions",
    "schema_migrations",
    "execution_counts",
    "queues",
)


class Logins:
    """The roles and one login user granted each, on the module's database."""

    def __init__(self, dsn: str) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.names = RoleNames(
            worker=f"kt_worker_{suffix}", operator=f"kt_operator_{suffix}", reader=f"kt_reader_{suffix}"
        )
        self.worker_user, self.operator_user = f"kt_wlogin_{suffix}", f"kt_ologin_{suffix}"
        self.worker_dsn = make_conninfo(dsn, user=self.worker_user)
        self.operator_dsn = make_conninfo(dsn, user=self.operator_user)

    @property
    def all_roles(self) -> tuple[str, ...]:
        return (self.worker_user, self.operator_user, self.names.worker, self.names.operator, self.names.reader)


@pytest.fixture(scope="module")
def logins(migrated: str) -> Iterator[Logins]:
    who = Logins(migrated)
    with psycopg.connect(migrated, autocommit=True) as conn:
        ensure_roles(conn, "kestrel", who.names)
        for user, role in ((who.worker_user, who.names.worker), (who.operator_user, who.names.operator)):
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(user)))
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), sql.Identifier(user)))
    yield who
    with psycopg.connect(migrated, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY(%s)", (list(who.all_roles),)
        )
        drop_roles(conn, who.all_roles)


def as_user(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, options="-c search_path=kestrel")


def refused(conn: psycopg.Connection, statement: str, params: tuple = ()) -> bool:
    try:
        conn.execute(statement, params)
    except psycopg.errors.InsufficientPrivilege:
        return True
    return False


# -- the roles themselves -------------------------------------------------------------------


def test_roles_are_nologin_groups_and_ensure_roles_is_idempotent(logins: Logins, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        again = ensure_roles(conn, "kestrel", logins.names)
        rows = conn.execute(
            "SELECT rolname, rolcanlogin, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles"
            " WHERE rolname = ANY(%s) ORDER BY rolname",
            ([logins.names.worker, logins.names.operator, logins.names.reader],),
        ).fetchall()
    assert again.created == [] and sorted(again.existing) == sorted(
        [logins.names.worker, logins.names.operator, logins.names.reader]
    )
    assert [r[1:] for r in rows] == [(False, False, False, False)] * 3
    assert RoleNames() == RoleNames("kestrel_worker", "kestrel_operator")


def test_ensure_roles_from_many_processes_at_once(migrated: str) -> None:
    """Concurrent callers in one database and in another (roles are cluster-wide) all succeed."""
    names = RoleNames(
        worker=f"kt_cw_{uuid.uuid4().hex[:8]}",
        operator=f"kt_co_{uuid.uuid4().hex[:8]}",
        reader=f"kt_cr_{uuid.uuid4().hex[:8]}",
    )
    other = create_database()
    try:
        with Kestrel(other) as app:
            app.migrate()
        errors: list[BaseException] = []
        created: list[str] = []
        barrier = threading.Barrier(6)

        def run(target: str) -> None:
            try:
                with psycopg.connect(target, autocommit=True) as conn:
                    barrier.wait()
                    created.extend(ensure_roles(conn, "kestrel", names).created)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(db,)) for db in (migrated, other) * 3]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert sorted(created) == sorted([names.worker, names.operator, names.reader])  # each once
        for target in (migrated, other):
            with psycopg.connect(target, autocommit=True) as conn:
                assert conn.execute(
                    "SELECT has_table_privilege(%s, 'kestrel.workflow_executions', 'SELECT')", (names.operator,)
                ).fetchone() == (True,)
                assert conn.execute(
                    "SELECT has_table_privilege(%s, 'kestrel.workflow_executions', 'SELECT')", (names.reader,)
                ).fetchone() == (True,)
    finally:
        drop_owned_then_database(other, (names.worker, names.operator, names.reader))
        with psycopg.connect(migrated, autocommit=True) as conn:
            drop_roles(conn, (names.worker, names.operator, names.reader))


def drop_roles(conn: psycopg.Connection, roles: Iterable[str], *, owned_only: bool = False) -> None:
    """DROP OWNED BY and DROP ROLE (``owned_only``: DROP OWNED BY alone, for another database
    the roles were granted in), again while another process's grant holds the same shared
    catalog row (a parameter's ACL is cluster-wide: 'tuple concurrently updated')."""
    for role in roles:
        for attempt in range(50):
            try:
                with conn.transaction():
                    conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                    if not owned_only:
                        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
                break
            except psycopg.errors.InternalError_:
                if attempt == 49:
                    raise


def drop_owned_then_database(dsn: str, roles: Iterable[str]) -> None:
    """Take ``roles``' grants out of a second database, which is dropped when the run ends: the
    roles themselves can then be dropped now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        drop_roles(conn, roles, owned_only=True)
    drop_at_the_end(dsn)


def test_concurrent_readers_each_get_their_parameter_grant(migrated: str) -> None:
    """Readers of different names granted at once from two databases (the migration lock is per
    database; a parameter's ACL row is cluster-wide, one update wins at a time): every reader
    ends with its SET privilege, none is silently skipped."""
    readers = [
        RoleNames(
            worker=f"kt_pw_{uuid.uuid4().hex[:8]}",
            operator=f"kt_po_{uuid.uuid4().hex[:8]}",
            reader=f"kt_pr_{uuid.uuid4().hex[:8]}",
        )
        for _ in range(8)
    ]
    other = create_database()
    with Kestrel(other) as app:
        app.migrate()
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(readers))

    def run(names: RoleNames, target: str) -> None:
        try:
            with psycopg.connect(target, autocommit=True) as conn:
                barrier.wait()
                ensure_roles(conn, "kestrel", names)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(names, (migrated, other)[i % 2])) for i, names in enumerate(readers)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        with psycopg.connect(migrated, autocommit=True) as conn:
            granted = [
                conn.execute("SELECT has_parameter_privilege(%s, 'temp_file_limit', 'SET')", (names.reader,)).fetchone()
                for names in readers
            ]
        assert granted == [(True,)] * len(readers)
    finally:
        roles = [role for names in readers for role in (names.worker, names.operator, names.reader)]
        drop_owned_then_database(other, roles)
        with psycopg.connect(migrated, autocommit=True) as conn:
            drop_roles(conn, roles)


def test_a_login_role_of_the_same_name_is_refused(dsn: str) -> None:
    name = f"kt_login_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        try:
            with pytest.raises(ValueError, match="can log in"):
                ensure_roles(conn, "kestrel", RoleNames(worker=name, operator=name + "_op"))
        finally:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name + "_op")))


# -- the operator ---------------------------------------------------------------------------


@pytest.mark.parametrize("table", TABLES)
def test_operator_reads_but_cannot_write_any_table(logins: Logins, dsn: str, table: str) -> None:
    with as_user(logins.operator_dsn) as conn:
        conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
        ident, column = sql.Identifier(table), sql.Identifier(_first_column(conn, table))
        assert refused(conn, sql.SQL("UPDATE {} SET {} = {}").format(ident, column, column))
        assert refused(conn, sql.SQL("DELETE FROM {}").format(ident))
        assert refused(conn, sql.SQL("TRUNCATE {}").format(ident))
        assert refused(conn, sql.SQL("INSERT INTO {} DEFAULT VALUES").format(ident))


def test_operator_cannot_create_or_read_outside_the_schema(logins: Logins, dsn: str, db: psycopg.Connection) -> None:
    db.execute("DROP TABLE IF EXISTS public.payroll")
    db.execute("CREATE TABLE public.payroll (who text, salary int)")
    db.execute("INSERT INTO public.payroll VALUES ('alice', 100)")
    with as_user(logins.operator_dsn) as conn:
        assert refused(conn, "SELECT * FROM public.payroll")
        assert refused(conn, "CREATE TABLE kestrel.mine (x int)")
        assert refused(conn, "CREATE TABLE public.mine (x int)")
        db.execute(sql.SQL("GRANT SELECT ON public.payroll TO {}").format(sql.Identifier(logins.names.operator)))
        assert conn.execute("SELECT who FROM public.payroll").fetchall() == [("alice",)]  # once granted


def test_operator_acts_only_through_kestrel_and_every_action_is_audited(
    logins: Logins,
    app: Kestrel,
    db: psycopg.Connection,
    start_worker,
) -> None:
    admin = app

    @admin.workflow("gated")
    def gated(ctx, value):
        d = ctx.wait_for_approval("ship", details={"value": value})
        return {"approved": d.approved, "by": d.by}

    start_worker(admin)
    gated_id, doomed_id = admin.enqueue("gated", 1), admin.enqueue("unknown-workflow", 2)
    wait_for(lambda: admin.get(gated_id).status == "waiting", what="the gate")
    with Kestrel(logins.operator_dsn) as op:
        assert op.get(gated_id).status == "waiting"
        op.approve(gated_id, "ship", by="alice", comment="lgtm")
        assert op.cancel(doomed_id, by="bob", comment="nobody runs it") == "enqueued"
        assert op.requeue(doomed_id, by="bob") == "cancelled"
        with op.connection() as conn:  # the functions are the only way in
            assert refused(
                conn, "UPDATE kestrel.workflow_executions SET status = 'success' WHERE id = %s", (doomed_id,)
            )
    wait_for(lambda: admin.get(gated_id).status == "success", what="the approved execution")
    assert admin.get(gated_id).output == {"approved": True, "by": "alice"}
    assert admin.get(doomed_id).status == "enqueued"
    audit = db.execute("SELECT actor, action, execution_id, comment FROM operator_actions ORDER BY id").fetchall()
    assert audit == [
        ("alice", "approve", gated_id, "lgtm"),
        ("bob", "cancel", doomed_id, "nobody runs it"),
        ("bob", "requeue", doomed_id, None),
    ]


# -- the worker -----------------------------------------------------------------------------


def test_worker_role_runs_workflows_with_steps_sleeps_and_gates(
    logins: Logins,
    dsn: str,
    db: psycopg.Connection,
    start_worker,
) -> None:
    app = Kestrel(logins.worker_dsn)

    @app.workflow("full")
    def full(ctx, n):
        a = ctx.step("double", lambda: n * 2)
        ctx.sleep("nap", timedelta(milliseconds=200))
        d = ctx.wait_for_approval("go")
        b = ctx.step("fails-once", flaky, retries=1, backoff=0.05)
        return {"a": a, "b": b, "approved": d.approved}

    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first try fails")
        return "ok"

    try:
        start_worker(app)
        eid = app.enqueue("full", 21)  # the worker role enqueues too (the application's role)
        wait_for(
            lambda: (
                app.get(eid).status == "waiting"
                and db.execute(
                    "SELECT 1 FROM workflow_waits WHERE execution_id = %s AND step_id = 'go'", (eid,)
                ).fetchone()
            ),
            what="the gate",
        )
        with Kestrel(logins.operator_dsn) as op:
            op.approve(eid, "go", by="carol")
        wait_for(lambda: app.get(eid).done, what="the execution to finish")
        assert (app.get(eid).status, app.get(eid).output) == ("success", {"a": 42, "b": "ok", "approved": True})
        assert db.execute(
            "SELECT count(*) FROM step_attempts WHERE execution_id = %s AND step_id = 'fails-once'", (eid,)
        ).fetchone() == (2,)
    finally:
        app.close()


def test_worker_role_cannot_delete_decide_or_read_the_audit(
    logins: Logins, app: Kestrel, db: psycopg.Connection
) -> None:
    eid = app.enqueue("x")
    with as_user(logins.worker_dsn) as conn:
        assert refused(conn, "DELETE FROM workflow_executions WHERE id = %s", (eid,))
        assert refused(conn, "DELETE FROM operation_outputs")
        assert refused(conn, "UPDATE operation_outputs SET output = '1'")
        assert refused(conn, "TRUNCATE workflow_executions")
        assert refused(conn, "SELECT * FROM operator_actions")
        # The audit cannot be forged by a worker login: no row, no db_user of its choosing.
        assert refused(conn, "INSERT INTO operator_actions (action, actor, db_user) VALUES ('cancel', 'a', 'b')")
        assert refused(conn, "UPDATE operator_actions SET db_user = 'b'")
        assert refused(conn, "CREATE TABLE kestrel.mine (x int)")
        assert refused(conn, "ALTER TABLE workflow_executions ADD COLUMN y int")
        assert refused(conn, "SELECT kestrel.cancel_execution(%s, 'mallory', NULL)", (eid,))
        assert refused(conn, "SELECT kestrel.decide_approval(%s, 'g', true, 'mallory', NULL)", (eid,))
        assert refused(conn, "SELECT kestrel.requeue_execution(%s, 'mallory', NULL)", (eid,))
    assert db.execute("SELECT status FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == ("enqueued",)


def test_worker_role_prunes_through_the_function(logins: Logins, app: Kestrel, db: psycopg.Connection) -> None:
    old = app.enqueue("x")
    db.execute("UPDATE workflow_executions SET status = 'success', finished_at = now() - interval '2 days'")
    with Kestrel(logins.worker_dsn) as app:
        result = prune.prune(
            prune.connection_runner(app.connection), "kestrel", older_than=timedelta(days=1), by="worker:w1"
        )
    assert result.deleted == 1
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE id = %s", (old,)).fetchone() == (0,)


def _first_column(conn: psycopg.Connection, table: str) -> str:
    row = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'kestrel'"
        " AND table_name = %s AND is_identity = 'NO' ORDER BY ordinal_position LIMIT 1",
        (table,),
    ).fetchone()
    assert row is not None, f"{table}: no visible column"
    return row[0]


def test_limited_queues_under_the_roles(logins: Logins, dsn: str, db: psycopg.Connection, start_worker) -> None:
    """The worker role declares queues, claims a limited one (row lock, rate window) and
    enqueues keyed executions; only the operator pauses and resumes, through the function."""
    app = Kestrel(logins.worker_dsn)
    app.queue("tight", concurrency=1, rate=(10, timedelta(minutes=1)))

    @app.workflow("t", queue="tight")
    def t(ctx, n):
        return n

    try:
        start_worker(app)
        eid = app.enqueue("t", 1, concurrency_key="k")
        wait_for(lambda: app.get(eid).status == "success", what="the limited execution")
        with as_user(logins.worker_dsn) as conn:
            assert refused(conn, "SELECT kestrel.set_queue_paused('tight', true, 'mallory', NULL)")
        with Kestrel(logins.operator_dsn) as op:
            op.pause_queue("tight", by="carol")
            op.resume_queue("tight", by="carol")
    finally:
        app.close()
    assert db.execute("SELECT actor, action FROM operator_actions ORDER BY id").fetchall() == [
        ("carol", "pause_queue"),
        ("carol", "resume_queue"),
    ]
