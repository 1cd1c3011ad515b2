"""Group commit of enqueue calls: concurrent calls of one process are one statement and one
commit, and each caller still gets its own id or its own error (issue 21)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql

from kestrel_core import Kestrel
from kestrel_core.db.statements import notify_channel
from kestrel_core.dispatch import enqueue as engine_enqueue
from tests.waiting import wait_for

# A backend of this database waiting for a lock (the blocked batch), whatever pool or bouncer
# connection it came through.
LOCK_WAITER = """
SELECT count(*) FROM pg_stat_activity a
 WHERE a.datname = current_database() AND a.wait_event_type = 'Lock' AND a.pid <> pg_backend_pid()
"""


@contextmanager
def batch_in_flight(app: Kestrel, dsn: str) -> Iterator[Callable[[], None]]:
    """A lone enqueue whose batch is held in flight: its idempotency key is taken by a
    transaction left open, so its statement waits. Yields ``release`` (rolls that back: the
    held batch then inserts its row)."""
    holder = psycopg.connect(dsn)
    holder.execute(
        "INSERT INTO kestrel.workflow_executions (workflow_name, input, idempotency_key)"
        " VALUES ('held', '0', 'held-key')"
    )
    held: dict[str, Any] = {}
    first = threading.Thread(target=lambda: held.update(id=app.enqueue("held", 0, idempotency_key="held-key")))
    first.start()
    with psycopg.connect(dsn, autocommit=True) as check:
        wait_for(lambda: check.execute(LOCK_WAITER).fetchone()[0] >= 1, what="the first batch to wait on the key")
    released = False

    def release() -> None:
        nonlocal released
        holder.rollback()
        released = True

    try:
        yield release
    finally:
        if not released:
            holder.rollback()
        holder.close()
        first.join(15)
    assert "id" in held  # the held call got its own row once the holder let go


def enqueue_from_threads(app: Kestrel, calls: list[dict[str, Any]]) -> tuple[list[threading.Thread], list[Any]]:
    """One thread per call (kwargs of app.enqueue); each result slot gets its id or its error."""
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = app.enqueue(**calls[i])
        except Exception as exc:  # the caller's own error, checked by the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    return threads, results


def test_calls_waiting_for_a_batch_are_one_statement_with_an_outcome_each(
    app: Kestrel, dsn: str, db: psycopg.Connection
) -> None:
    taken = app.enqueue("w", "first holder", idempotency_key="taken")
    calls = [{"name": "w", "input": {"n": i}} for i in range(5)]
    calls += [
        {"name": "w", "input": "dup-a", "idempotency_key": "dup"},
        {"name": "w", "input": "dup-b", "idempotency_key": "dup"},
        {"name": "w", "input": "again", "idempotency_key": "taken"},
        {"name": "other", "input": "another workflow", "priority": 5},
    ]
    batcher = app._enqueue_batcher()
    listener = psycopg.connect(dsn, autocommit=True)
    listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(notify_channel("kestrel"))))
    with listener, batch_in_flight(app, dsn) as release:
        threads, results = enqueue_from_threads(app, calls)
        wait_for(lambda: batcher.waiting() == len(calls), what="every call to queue behind the held batch")
        before = dict(batcher.stats)
        release()
        for t in threads:
            t.join(15)
        notes = sorted(n.payload for n in listener.notifies(timeout=1.0, stop_after=4))
    assert batcher.stats["batches"] == before["batches"] + 2  # the held one, then all the others
    assert notes == ["held", "other", "w"]  # one wake-up per workflow name and batch, not one per row
    assert batcher.stats["largest"] >= len(calls)
    ids = results
    assert all(isinstance(i, int) for i in ids), ids
    assert len(set(ids[:5])) == 5 and not set(ids[:5]) & {ids[5], taken, ids[8]}
    assert ids[5] == ids[6] != taken  # one row for a key given twice in one batch
    assert ids[7] == taken  # a key already taken: its holder's id, nothing inserted
    stored = dict(db.execute("SELECT id, input FROM workflow_executions").fetchall())
    for i in range(5):
        assert stored[ids[i]] == {"n": i}  # each caller got the id of its own row
    assert stored[ids[5]] == "dup-a" or stored[ids[5]] == "dup-b"
    assert stored[taken] == "first holder"
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE idempotency_key = 'dup'").fetchone()[0] == 1
    assert db.execute(
        "SELECT workflow_name, priority FROM workflow_executions WHERE id = %s", (ids[8],)
    ).fetchone() == ("other", 5)
    # One transaction wrote them all: now() is the same for every row of it.
    assert (
        db.execute(
            "SELECT count(DISTINCT created_at) FROM workflow_executions WHERE id = ANY(%s)",
            ([i for i in ids if i != taken],),
        ).fetchone()[0]
        == 1
    )


def test_a_row_the_database_refuses_fails_only_its_caller(
    app: Kestrel, dsn: str, db: psycopg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    # A rule of the user's own schema (a CHECK constraint): the rows are valid JSON, so only
    # the database can refuse this one.
    db.execute(
        "ALTER TABLE workflow_executions ADD CONSTRAINT no_poison"
        " CHECK (input IS DISTINCT FROM '\"poison\"'::jsonb) NOT VALID"
    )
    try:
        calls = [{"name": "w", "input": i} for i in range(4)] + [{"name": "w", "input": "poison"}]
        batcher = app._enqueue_batcher()
        with batch_in_flight(app, dsn) as release:
            threads, results = enqueue_from_threads(app, calls)
            wait_for(lambda: batcher.waiting() == len(calls), what="every call to queue behind the held batch")
            release()
            for t in threads:
                t.join(15)
    finally:
        db.execute("ALTER TABLE workflow_executions DROP CONSTRAINT no_poison")
    assert isinstance(results[4], psycopg.errors.CheckViolation) and "no_poison" in str(results[4])
    assert all(isinstance(r, int) for r in results[:4]), results
    stored = dict(db.execute("SELECT id, input FROM workflow_executions WHERE id = ANY(%s)", (results[:4],)).fetchall())
    assert stored == {results[i]: i for i in range(4)}
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE input = '\"poison\"'").fetchone()[0] == 0
    assert "event=enqueue_batch_refused rows=5" in caplog.text  # refused as a batch, then row by row


def test_many_threads_get_distinct_ids_of_their_own_rows(app: Kestrel, db: psycopg.Connection) -> None:
    calls = [{"name": "w", "input": {"t": i}} for i in range(64)]
    threads, results = enqueue_from_threads(app, calls)
    for t in threads:
        t.join(30)
    assert len(set(results)) == 64
    stored = dict(db.execute("SELECT id, input FROM workflow_executions WHERE id = ANY(%s)", (results,)).fetchall())
    assert all(stored[results[i]] == {"t": i} for i in range(64))


def test_bad_argument_fails_its_caller_before_any_batch(app: Kestrel, db: psycopg.Connection) -> None:
    from kestrel_core import InvalidArgument

    with pytest.raises(InvalidArgument, match="idempotency key must be a non-empty string"):
        app.enqueue("w", 1, idempotency_key=42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="NUL"):
        app.enqueue("w", 1, concurrency_key="a\x00b")
    with pytest.raises(InvalidArgument, match="run_at must be a datetime"):
        app.enqueue("w", 1, run_at="tomorrow")  # type: ignore[arg-type]
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone()[0] == 0


LISTENING = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND application_name = 'kestrel-listener' AND btrim(query, E' \n') LIKE 'LISTEN %'
"""


@pytest.fixture
def listening_app(app: Kestrel) -> Kestrel:
    if app.transaction_pooling:
        pytest.skip("through PgBouncer workers poll: there is no wake-up to test")
    return app


def test_a_lone_enqueue_wakes_an_idle_worker_without_a_poll(
    listening_app: Kestrel, db: psycopg.Connection, start_worker
) -> None:
    app = listening_app

    @app.workflow("ping")
    def ping(ctx, x):
        return x

    # A poll every minute: only the NOTIFY of an enqueue can start it within the waits below.
    start_worker(app, poll_interval=60.0)
    wait_for(lambda: db.execute(LISTENING).fetchone()[0], what="the worker to LISTEN")
    warm = app.enqueue("ping", 0)  # the worker's claims after connecting are behind it now
    wait_for(lambda: app.get(warm).status == "success", timeout=20, what="the first enqueue to run")
    eid = app.enqueue("ping", 1)
    wait_for(lambda: app.get(eid).status == "success", timeout=20, what="the lone enqueue to run")
    # Then a batch of concurrent ones (one NOTIFY for the batch) wakes it too.
    threads, results = enqueue_from_threads(app, [{"name": "ping", "input": i} for i in range(16)])
    for t in threads:
        t.join(15)
    wait_for(lambda: all(app.get(i).status == "success" for i in results), timeout=20, what="the batch to run")


class Interrupted(Exception):
    """Raised in the main thread by a signal handler, as KeyboardInterrupt would be."""


def test_a_caller_interrupted_while_queued_leaves_the_queue(app: Kestrel, dsn: str, db: psycopg.Connection) -> None:
    import os
    import signal

    batcher = app._enqueue_batcher()

    def interrupt(_signum: int, _frame: object) -> None:
        raise Interrupted

    def signal_once_queued() -> None:
        wait_for(lambda: batcher.waiting() == 1, what="the main thread's call to queue")
        os.kill(os.getpid(), signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        with batch_in_flight(app, dsn) as release:
            sender = threading.Thread(target=signal_once_queued)
            sender.start()
            with pytest.raises(Interrupted):
                app.enqueue("w", "interrupted")  # queued behind the held batch
            sender.join(15)
            assert batcher.waiting() == 0
            release()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    # The held batch's writer had no one to hand on to: the next call leads a batch of its own.
    later: list[Any] = []
    after = threading.Thread(target=lambda: later.append(app.enqueue("w", "after")))
    after.start()
    after.join(15)
    assert later and db.execute("SELECT input FROM workflow_executions WHERE id = %s", (later[0],)).fetchone() == (
        "after",
    )
    assert db.execute("SELECT count(*) FROM workflow_executions WHERE input = '\"interrupted\"'").fetchone()[0] == 0


def test_a_failed_wake_up_does_not_fail_rows_already_committed(dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    """The batch's rows commit before its wake-up is sent: an error there must not reach their
    callers (they would retry and insert twice); it is logged and polling covers it."""

    rows = engine_enqueue.rows({}, "w", [1], single=True)
    with psycopg.connect(dsn) as conn:  # a transaction left aborted: every statement fails
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1 / 0")
        engine_enqueue.wake(conn, "kestrel", rows)
    assert "event=wake_failed workflows=w" in caplog.text


def test_the_first_enqueue_after_a_server_restart_succeeds(private_cluster) -> None:
    """The batches' own connection is not pinged before a batch (that was a round trip each):
    the session a restart ended is seen on its socket, and the batch goes on a new one."""
    dsn = private_cluster.create_database(f"writer_restart_{os.getpid()}")
    app = Kestrel(dsn)
    app.migrate()
    try:
        before = app.enqueue("w", "before the restart")
        private_cluster.restart()
        after = app.enqueue("w", "after the restart")
        with psycopg.connect(dsn) as conn:
            stored = conn.execute("SELECT id, input FROM kestrel.workflow_executions ORDER BY id").fetchall()
        assert stored == [(before, "before the restart"), (after, "after the restart")]
    finally:
        app.close()


def test_the_writer_connection_is_checked_above_descriptor_1024(dsn: str, db: psycopg.Connection) -> None:
    """An app server may hold a thousand sockets: the batches' own connection is checked with a
    call that takes any descriptor (select() refuses those over 1023)."""
    spare = []
    try:
        while not spare or spare[-1] < 1100:
            spare.append(os.dup(0))
        with Kestrel(dsn) as app:
            first = app.enqueue("w", 1)  # opens the writer connection, over descriptor 1100
            second = app.enqueue("w", 2)  # checks it before the batch
        ids = [row[0] for row in db.execute("SELECT id FROM kestrel.workflow_executions ORDER BY id")]
        assert ids == [first, second]
    finally:
        for fd in spare:
            os.close(fd)


def test_a_lone_enqueue_opens_one_connection(dsn: str, sessions_opened: list[str]) -> None:
    """A script or a CLI call that enqueues once opens one session, the batches' own, which
    checks the schema as it opens. It used to open three: a probe for the schema check, the
    pool's first connection (unused) and the batches' own (~5 ms of server CPU each, and
    the waits). Reading then adds the pool's first, not a probe as well."""
    with Kestrel(dsn, application_name="kt-lone-enqueue") as app:
        first = app.enqueue("w", 1)
        second = app.enqueue("w", 2)
        assert [first, second] == [1, 2]
        assert sessions_opened == ["kt-lone-enqueue"]
        assert app.get(second).input == 2
    assert sessions_opened == ["kt-lone-enqueue"] * 2


# The plans of the statements this session prepared (a session sees only its own).
PLANS = "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements"


def test_small_batches_are_not_planned_again_at_every_batch(dsn: str) -> None:
    """Batches of a few rows (8 callers make batches of 8) reuse one plan: a custom plan for
    each cost more planning than the batch's execution (bench/README.md, "Ingestion")."""
    with Kestrel(dsn) as app:
        for _ in range(12):  # past psycopg's prepare threshold and Postgres's 5 custom plans
            app._write_batch(engine_enqueue.rows({}, "w", list(range(8))))
        with app._writer.use() as conn:
            generic, custom = conn.execute(PLANS).fetchone()
    assert custom == 0 and generic >= 6


def test_a_refused_batch_raises_its_own_error_and_logs_nothing_else(
    dsn: str, db: psycopg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch's statements go in one round trip (BEGIN, ENQUEUE, COMMIT, WAKE): a refused
    insert raises the server's own error, with its details, rolls the batch back, logs
    nothing (psycopg's pipeline once logged "error ignored terminating <Pipeline>" too), and
    the connection writes the next batch with the statements it prepared."""
    db.execute(
        "ALTER TABLE workflow_executions ADD CONSTRAINT no_poison"
        " CHECK (input IS DISTINCT FROM '\"poison\"'::jsonb) NOT VALID"
    )
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            engine_enqueue.write_and_wake(conn, "kestrel", engine_enqueue.rows({}, "w", ["first"], single=True))
            with caplog.at_level("WARNING"), pytest.raises(psycopg.errors.CheckViolation, match="no_poison") as err:
                engine_enqueue.write_and_wake(conn, "kestrel", engine_enqueue.rows({}, "w", ["poison", "fine"]))
            assert err.value.diag.constraint_name == "no_poison"
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            (later,) = engine_enqueue.write_and_wake(
                conn, "kestrel", engine_enqueue.rows({}, "w", ["later"], single=True)
            )
            stored = conn.execute("SELECT id, input FROM kestrel.workflow_executions ORDER BY id").fetchall()
            assert [i for _, i in stored] == ["first", "later"] and stored[-1][0] == later
            assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (2,)
    finally:
        db.execute("ALTER TABLE workflow_executions DROP CONSTRAINT no_poison")
    assert [r.getMessage() for r in caplog.records] == []
