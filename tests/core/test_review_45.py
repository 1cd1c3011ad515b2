"""Review 45: adversarial tests of the promises touched by migration 0040 (guard_owner_writes,
count_finished_statement), lock_schedule, and the enqueue options taken as ``**given``.

Held promises are kept as passing tests (what was attacked, and how); a broken one fails.
"""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg
import pytest
from psycopg.errors import InsufficientPrivilege

from kestrel_core import AsyncKestrel, EnqueueOptions, Kestrel
from kestrel_core.db.migrate import FunctionFile, available, function_files, migrate
from kestrel_core.workflow.flow_context import child_options
from tests.conftest import create_database, drop_database
from tests.core.schema_history import created_after
from tests.core.test_roles import Logins, as_user, logins  # noqa: F401 (fixture)

TRIGGERS = r"""
SELECT c.relname ~ '_p\d+$', c.relname, t.tgname, p.proname, encode(t.tgargs, 'escape'), t.tgtype,
       regexp_replace(pg_get_triggerdef(t.oid), '_p\d+', '_pN', 'g')
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_proc p ON p.oid = t.tgfoid
 WHERE n.nspname = 'kestrel' AND NOT t.tgisinternal
 ORDER BY 2, 3
"""
COUNTS_WRONG = """
SELECT coalesce(c.workflow_name, a.workflow_name), coalesce(c.status, a.status), coalesce(c.n, 0), coalesce(a.n, 0)
  FROM (SELECT workflow_name, status, sum(n) AS n FROM kestrel.execution_counts GROUP BY 1, 2) c
  FULL JOIN (SELECT workflow_name, status, count(*) AS n FROM kestrel.workflow_executions
              WHERE status IN ('success', 'error', 'cancelled') GROUP BY 1, 2) a USING (workflow_name, status)
 WHERE coalesce(c.n, 0) <> coalesce(a.n, 0)
"""


def _functions_before() -> list[FunctionFile]:
    """The function files of a version-39 schema (schema_history.py)."""
    return [f for f in function_files() if f.name not in created_after(39)]


def _seed(conn: psycopg.Connection) -> None:
    conn.execute(
        "INSERT INTO kestrel.workflow_executions (workflow_name, status, finished_at)"
        " SELECT 'w' || (i % 3), (ARRAY['success', 'error', 'cancelled'])[1 + i % 3], now() - interval '3 days'"
        "   FROM generate_series(1, 30) i"
    )
    conn.execute(
        "INSERT INTO kestrel.workflow_executions (workflow_name, status)"
        " VALUES ('w0', 'paused'), ('w1', 'running'), ('w2', 'enqueued'), ('w2', 'waiting')"
    )


@pytest.fixture(scope="module")
def fresh_and_upgraded() -> tuple[str, str]:
    """A database migrated by this code from nothing, and one migrated as a version-39 schema
    (its migrations and function files), seeded with rows, then upgraded."""
    before = _functions_before()
    fresh, upgraded = create_database("kestrel_r45f"), create_database("kestrel_r45u")
    try:
        with psycopg.connect(fresh, autocommit=True) as conn:
            migrate(conn, "kestrel")
        with psycopg.connect(upgraded, autocommit=True) as conn:
            assert migrate(conn, "kestrel", migrations=[m for m in available() if m.version < 40], functions=before)
            _seed(conn)
            assert conn.execute(COUNTS_WRONG).fetchall() == []
            assert migrate(conn, "kestrel") == [40]
            assert migrate(conn, "kestrel") == []  # twice: nothing left
        yield fresh, upgraded
    finally:
        drop_database(fresh)
        drop_database(upgraded)


# -- migration 0040 -----------------------------------------------------------------------------


def test_an_upgraded_schema_has_the_fresh_one_s_triggers_and_its_counts(fresh_and_upgraded) -> None:
    """Attack: a v39 database holding finished, paused, running rows, upgraded; its triggers
    (names, so order; timing; WHEN; function and argument, on the parents and every partition)
    against a fresh one's, and execution_counts against count(*) after inserts, deletes and a
    prune of finished rows. Held."""
    fresh, upgraded = fresh_and_upgraded
    with psycopg.connect(fresh) as f, psycopg.connect(upgraded, autocommit=True) as u:
        assert sorted(u.execute(TRIGGERS).fetchall()) == sorted(f.execute(TRIGGERS).fetchall())
        assert u.execute(COUNTS_WRONG).fetchall() == []
        u.execute(
            "INSERT INTO kestrel.workflow_executions (workflow_name, status, finished_at)"
            " SELECT 'w' || (i % 4), (ARRAY['success', 'error', 'cancelled', 'enqueued'])[1 + i % 4],"
            "        CASE WHEN i % 4 < 3 THEN now() END FROM generate_series(1, 40) i"
        )
        assert u.execute(COUNTS_WRONG).fetchall() == []
        u.execute("DELETE FROM kestrel.workflow_executions WHERE id % 3 = 0 AND status <> 'paused'")
        assert u.execute(COUNTS_WRONG).fetchall() == []
        assert u.execute("SELECT kestrel.prune_finished(now() - interval '1 day', 1000, 'r45')").fetchone()[0] > 0
        assert u.execute(COUNTS_WRONG).fetchall() == []
        # the old functions are gone, the rule of every guard trigger is its argument
        assert u.execute(
            "SELECT count(*) FROM pg_proc WHERE proname IN ('guard_execution_inserts', 'guard_finished_executions',"
            " 'guard_paused_executions', 'guard_paused_rows', 'guard_step_attempts', 'count_finished_inserted',"
            " 'count_finished_deleted')"
        ).fetchone() == (0,)


def test_migrating_concurrently_from_39_applies_40_once() -> None:
    """Attack: four processes migrate a v39 database at once. Held: one applies 40."""
    before = _functions_before()
    dsn = create_database("kestrel_r45c")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            migrate(conn, "kestrel", migrations=[m for m in available() if m.version < 40], functions=before)
        results: list[object] = []

        def run() -> None:
            try:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    results.append(migrate(conn, "kestrel"))
            except Exception as exc:
                results.append(exc)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(map(str, results)) == ["[40]", "[]", "[]", "[]"]
    finally:
        drop_database(dsn)


WORKER_REFUSALS = {
    # rule: (status of the row made by the owner, the worker's statement, the message's start)
    "finished": ("success", "UPDATE workflow_executions SET status = 'enqueued' WHERE id = %s",
                 "permission denied to change the finished execution"),
    "cancel": ("enqueued", "UPDATE workflow_executions SET status = 'cancelled' WHERE id = %s",
               "permission denied to cancel execution"),
    "paused": ("enqueued", "UPDATE workflow_executions SET status = 'paused' WHERE id = %s",
               "permission denied to move execution"),
    "paused_row": ("paused", "UPDATE workflow_executions SET run_at = now() + interval '9 days' WHERE id = %s",
                   "permission denied to change paused execution"),
}  # fmt: skip


def test_partitions_made_or_reattached_after_0040_refuse_a_worker_with_their_rule(
    logins: Logins,
    db: psycopg.Connection,
) -> None:
    """Attack: partitions created after the migration (ensure_partitions), and one detached and
    attached again, hold rows a worker login then tries every refused write on, through the
    parent and directly on the partition. Held: each rule's own message on the parent, no
    privilege on the partition."""
    db.execute("SELECT ensure_partitions(8)")
    top = db.execute("SELECT max(lo), max(hi) FROM history_partitions").fetchone()
    assert top is not None
    lo, hi = top
    part = f"workflow_executions_p{lo}"
    db.execute(f"ALTER TABLE workflow_executions DETACH PARTITION {part}")
    db.execute(f"ALTER TABLE workflow_executions ATTACH PARTITION {part} FOR VALUES FROM ({lo}) TO ({hi})")
    args = dict(
        db.execute(
            "SELECT t.tgname, encode(t.tgargs, 'escape') FROM pg_trigger t"
            " WHERE t.tgrelid = %s::regclass AND t.tgname LIKE 'guard%%'",
            (f"kestrel.{part}",),
        ).fetchall()
    )
    assert args["guard_execution_inserts"] == "insert\\000"
    assert args["guard_paused_rows"] == "paused_row\\000"
    try:
        for n, (rule, (status, statement, message)) in enumerate(WORKER_REFUSALS.items()):
            eid = lo + n
            db.execute(
                "INSERT INTO workflow_executions (id, workflow_name, status) OVERRIDING SYSTEM VALUE"
                " VALUES (%s, 'w', %s)",
                (eid, status),
            )
            with as_user(logins.worker_dsn) as conn:
                with pytest.raises(InsufficientPrivilege) as refused:
                    conn.execute(statement, (eid,))
                assert refused.value.diag.message_primary.startswith(message), rule
                with pytest.raises(InsufficientPrivilege, match=f"permission denied for table {part}"):
                    conn.execute(statement.replace("workflow_executions", part), (eid,))
            assert db.execute("SELECT status FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == (status,)
        with as_user(logins.worker_dsn) as conn, pytest.raises(InsufficientPrivilege) as refused:
            conn.execute(
                "INSERT INTO workflow_executions (workflow_name, status, finished_at) VALUES ('w', 'success', now())"
            )
        assert refused.value.diag.message_primary.startswith("permission denied to insert an execution that is success")
    finally:
        db.execute("DELETE FROM workflow_executions WHERE id >= %s AND id < %s", (lo, hi))


# -- schedules: lock_schedule -------------------------------------------------------------------


def test_every_schedule_verb_on_a_missing_schedule_keeps_its_message(app: Kestrel, db: psycopg.Connection) -> None:
    """Attack: pause, resume, trigger, remove a schedule that does not exist. Held: the
    messages of e983907, SQLSTATE KS404, nothing written."""
    for verb, call in (
        ("pause", lambda: app.pause_schedule("nope", by="r45")),
        ("resume", lambda: app.resume_schedule("nope", by="r45")),
        ("trigger", lambda: app.trigger_schedule("nope", by="r45")),
        ("remove", lambda: app.remove_schedule("nope", by="r45")),
    ):
        with pytest.raises(Exception, match=f'cannot {verb}: no schedule named "nope"'):
            call()
    for verb in ("remove", "trigger"):
        with pytest.raises(psycopg.Error) as refused:
            db.execute(f"SELECT {verb}_schedule('nope', 'r45', NULL)")
        assert refused.value.sqlstate == "KS404"
        assert refused.value.diag.message_hint == "Schedules are listed by: kestrel-console schedule list"
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (0,)


@pytest.mark.parametrize("second", ["trigger", "remove", "pause"])
def test_a_verb_waiting_on_a_concurrent_remove_finds_no_schedule(
    app: Kestrel, db: psycopg.Connection, dsn: str, second: str
) -> None:
    """Attack: remove a schedule in a transaction left open while another session triggers,
    removes or pauses it. Held: the second waits, then is refused KS404 once the remove
    commits; one audit row, no execution."""
    app.add_schedule("s45", "0 * * * *", "report", by="r45")
    other: list[object] = []
    with psycopg.connect(dsn) as first:
        first.execute("SELECT kestrel.remove_schedule('s45', 'r45', NULL)")

        def go() -> None:
            try:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    if second == "pause":
                        conn.execute("SELECT kestrel.set_schedule_paused('s45', true, NULL, 'r45', NULL)")
                    else:
                        conn.execute(f"SELECT kestrel.{second}_schedule('s45', 'r45', NULL)")
                other.append("ok")
            except psycopg.Error as exc:
                other.append((exc.sqlstate, str(exc).splitlines()[0]))

        thread = threading.Thread(target=go)
        thread.start()
        time.sleep(0.5)
        assert other == []  # waiting on the lock
        first.commit()
        thread.join(10)
    assert other == [("KS404", f'cannot {second}: no schedule named "s45"')]
    assert db.execute("SELECT action, count(*) FROM operator_actions GROUP BY 1 ORDER BY 1").fetchall() == [
        ("add_schedule", 1),
        ("remove_schedule", 1),
    ]
    assert db.execute("SELECT count(*) FROM schedules WHERE name = 's45'").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (0,)


# -- the enqueue options as **given -------------------------------------------------------------


def test_async_enqueue_refuses_a_misspelt_keyword_when_awaited_and_writes_nothing(
    app: Kestrel, db: psycopg.Connection
) -> None:
    """Attack: the async client's enqueue with a misspelt option. At e983907 the call itself
    raised TypeError (Python binds a coroutine function's arguments at the call); the options
    are now checked in the call's body, so the TypeError comes when it is awaited, where a bad
    option's value always failed (a type checker flags it at the call: Unpack[EnqueueKeywords]).
    Documented in EnqueueOptions.of; held: it fails, names the options, writes nothing."""

    async def main() -> None:
        async with AsyncKestrel(app.dsn) as client:
            pending = client.enqueue("w", None, priorty=1)  # type: ignore[call-arg]
            with pytest.raises(TypeError, match="^unexpected keyword argument 'priorty': the options are"):
                await pending

    asyncio.run(main())
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (0,)


def test_a_misspelt_option_names_only_the_options_the_call_takes() -> None:
    """Attack: a misspelt keyword to enqueue_many / start_child (ChildKeywords: no idempotency
    key). The TypeError says "the enqueue options are concurrency_key, delay, idempotency_key,
    ..." - it offers idempotency_key, which both then refuse. BROKE (message only)."""
    with pytest.raises(TypeError) as refused:
        child_options(None, priorty=1)
    assert "idempotency_key" not in str(refused.value)


def test_none_options_and_options_value_behave_as_before(app: Kestrel, db: psycopg.Connection) -> None:
    """Attack: None keywords beside options=, conn= inside a rolled-back transaction with a
    misspelt keyword. Held: None is "not given", the misspelt call writes nothing and leaves
    the caller's transaction usable."""
    eid = app.enqueue("w", None, options=EnqueueOptions(priority=3), priority=None, idempotency_key=None)
    assert db.execute("SELECT priority FROM workflow_executions WHERE id = %s", (eid,)).fetchone() == (3,)
    with psycopg.connect(app.dsn) as conn:
        with pytest.raises(TypeError):
            app.enqueue("w", None, conn=conn, queu="q")  # type: ignore[call-arg]
        inside = app.enqueue("w", None, conn=conn, queue="q45")
        conn.rollback()
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE id = %s", (inside,)).fetchone() == (0,)


def test_start_child_in_sync_and_async_workflows_takes_none_and_refuses_a_misspelt_option(
    app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    """Attack: start_child in a sync and an async workflow with None keywords beside options=,
    with a misspelt option, and with idempotency_key (which a child never takes). Held: the
    options land on the child; a misspelt one fails the parent with a TypeError and starts
    no child; idempotency_key is refused (a TypeError, as at e983907)."""
    from tests.waiting import wait_finished as done

    @app.workflow("leaf45")
    def leaf45(ctx, n):
        return n

    @app.workflow("sync45")
    def sync45(ctx, how):
        if how == "misspelt":
            ctx.start_child("leaf45", 1, priorty=5)
        if how == "idem":
            ctx.start_child("leaf45", 1, idempotency_key="k")
        h = ctx.start_child("leaf45", 1, options=EnqueueOptions(priority=5), queue=None, delay=None)
        return h.execution_id

    @app.workflow("async45")
    async def async45(ctx, how):
        if how == "misspelt":
            await ctx.start_child("leaf45", 1, priorty=5)
        h = await ctx.start_child("leaf45", 1, priority=6, run_at=None)
        return h.execution_id

    start_worker(app)
    for name, prio in (("sync45", 5), ("async45", 6)):
        final = done(app, app.enqueue(name, "ok"))
        assert final.status == "success", final.error
        assert db.execute("SELECT priority FROM workflow_executions WHERE id = %s", (final.output,)).fetchone() == (
            prio,
        )
    before = db.execute("SELECT count(*) FROM workflow_executions WHERE workflow_name = 'leaf45'").fetchone()
    for name, how in (("sync45", "misspelt"), ("async45", "misspelt"), ("sync45", "idem")):
        final = done(app, app.enqueue(name, how))
        assert final.status == "error", (name, how)
        assert "TypeError" in str(final.error) and ("idempotency_key" in str(final.error)) == (how == "idem"), (
            final.error
        )
    after = db.execute("SELECT count(*) FROM workflow_executions WHERE workflow_name = 'leaf45'").fetchone()
    assert after == before
