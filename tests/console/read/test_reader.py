"""The console's query layer (kestrel_console.read.Reader) against real Postgres.

Every answer is checked against the seeded story (tests/seed.py) or against plain SQL on the
same rows; the EXPLAIN tests check that no refresh query scans workflow_executions
sequentially on a 200k-row history, and that dropping any index they rely on is caught.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql

from kestrel_console.read import Reader, ReadTimeout, describe_blocker
from kestrel_console.read.search import parse_filter
from kestrel_core import STATUSES, DatabaseUnavailable, Kestrel, SchemaOutdated
from kestrel_core.db.statements import render
from tests.console.read import plans
from tests.console.read.plans import as_parents, plan_nodes, seq_scans
from tests.seed import SeedFacts, seed_history
from tests.waiting import wait_until_blocked, wait_until_gone

FINISHED = ("success", "error", "cancelled")


@pytest.fixture
def facts(db: psycopg.Connection) -> SeedFacts:
    return seed_history(db)


def db_now(db: psycopg.Connection) -> datetime:
    return db.execute("SELECT now()").fetchone()[0]


def sql_counts(db: psycopg.Connection) -> tuple[dict[str, int], list[tuple[str, str, int]]]:
    """The truth, by brute force: per status, and per (workflow, status)."""
    per_status = {s: 0 for s in STATUSES}
    for status, n in db.execute("SELECT status, count(*) FROM workflow_executions GROUP BY status"):
        per_status[status] = n
    order = {s: i for i, s in enumerate(STATUSES)}
    per_workflow = sorted(
        db.execute("SELECT workflow_name, status, count(*) FROM workflow_executions GROUP BY 1, 2").fetchall(),
        key=lambda r: (r[0], order[r[1]]),
    )
    return per_status, per_workflow


def assert_counts_exact(reader: Reader, db: psycopg.Connection) -> None:
    per_status, per_workflow = sql_counts(db)
    assert reader.status_counts() == per_status
    assert [(r["workflow_name"], r["status"], r["count"]) for r in reader.queue_depth()] == per_workflow
    dash = reader.dashboard()
    assert dash["status_counts"] == per_status
    assert [(r["workflow_name"], r["status"], r["count"]) for r in dash["queue_depth"]] == per_workflow


# -- a fresh database ----------------------------------------------------------------------------


def test_fresh_database_answers_zeros_and_empty_lists(reader: Reader) -> None:
    assert reader.status_counts() == {s: 0 for s in STATUSES}
    assert reader.queue_depth() == []
    assert reader.stuck_leases() == []
    assert reader.workers() == []
    assert reader.unserved_workflows() == []
    assert reader.pending_approvals() == []
    assert reader.approvals_summary() == {"count": 0, "oldest_age_s": None}
    assert reader.errors_since(3600) == 0
    assert reader.list_executions() == []
    assert reader.execution(1) is None
    assert reader.steps(1) == [] and reader.timeline(1) == []
    assert reader.blocker(1) is None
    activity = reader.activity(minutes=15, bucket_s=60)
    assert len(activity) == 15
    assert all(b["enqueued"] == b["started"] == b["completed"] == b["failed"] == 0 for b in activity)
    dash = reader.dashboard()
    assert dash["status_counts"] == {s: 0 for s in STATUSES}
    assert dash["errors_last_hour"] == 0 and dash["approvals_summary"]["count"] == 0
    assert dash["elapsed_ms"] > 0


# -- counts --------------------------------------------------------------------------------------


def test_status_counts_and_queue_depth_match_the_seed(reader: Reader, db, facts: SeedFacts) -> None:
    expected = Counter(e.status for e in facts.executions.values())
    assert reader.status_counts() == {s: expected.get(s, 0) for s in STATUSES}
    per_workflow = Counter((e.workflow_name, e.status) for e in facts.executions.values())
    order = {s: i for i, s in enumerate(STATUSES)}
    assert [(r["workflow_name"], r["status"], r["count"]) for r in reader.queue_depth()] == sorted(
        ((w, s, n) for (w, s), n in per_workflow.items()), key=lambda r: (r[0], order[r[1]])
    )
    assert_counts_exact(reader, db)


def test_counts_stay_exact_through_every_transition(reader: Reader, db, app: Kestrel, facts: SeedFacts) -> None:
    assert_counts_exact(reader, db)
    new = app.enqueue_many("billing-sync", [{"n": i} for i in range(5)])
    assert_counts_exact(reader, db)
    app.cancel(new[0], by="t")  # enqueued -> cancelled
    db.execute("UPDATE workflow_executions SET status = 'success', finished_at = now() WHERE id = %s", (new[1],))
    db.execute("UPDATE workflow_executions SET status = 'error', finished_at = now() WHERE id = %s", (new[2],))
    assert_counts_exact(reader, db)
    app.requeue(new[2], by="t")  # error -> enqueued
    app.requeue(facts.id("cancelled"), by="t")  # cancelled -> enqueued
    assert_counts_exact(reader, db)
    db.execute("UPDATE workflow_executions SET workflow_name = 'renamed' WHERE id = %s", (new[1],))
    assert_counts_exact(reader, db)
    db.execute(
        "DELETE FROM workflow_executions WHERE status IN ('success', 'error') AND id <> %s", (facts.id("approved"),)
    )  # pruning
    assert_counts_exact(reader, db)
    db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, finished_at) "
        "SELECT 'imported', 'success', now() FROM generate_series(1, 30)"
    )
    assert_counts_exact(reader, db)
    db.execute("TRUNCATE workflow_executions CASCADE")
    assert_counts_exact(reader, db)
    assert reader.status_counts() == {s: 0 for s in STATUSES}


def test_counts_stay_exact_under_concurrent_finishes(reader: Reader, db, dsn: str, app: Kestrel) -> None:
    ids = app.enqueue_many("bulk", [None] * 400)
    errors: list[BaseException] = []

    def finish(part: list[int]) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for i, eid in enumerate(part):
                    conn.execute(
                        "UPDATE kestrel.workflow_executions SET status = %s, finished_at = now() WHERE id = %s",
                        (FINISHED[i % 3], eid),
                    )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=finish, args=(ids[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert_counts_exact(reader, db)
    assert reader.status_counts()["success"] == sum(1 for k in range(4) for i, _ in enumerate(ids[k::4]) if i % 3 == 0)


# -- live trouble --------------------------------------------------------------------------------


def test_stuck_leases(reader: Reader, db, facts: SeedFacts) -> None:
    rows = reader.stuck_leases()
    now = db_now(db)
    expected = sorted((e for e in facts.with_status("running") if e.lease_expires < now), key=lambda e: e.lease_expires)
    assert [r["id"] for r in rows] == [e.id for e in expected]
    stuck = next(r for r in rows if r["id"] == facts.id("stuck"))
    assert stuck["workflow_name"] == "billing-sync" and stuck["owner_id"] == "worker-dead"
    assert stuck["lease_expires"] == facts.executions["stuck"].lease_expires
    assert stuck["expired_for_s"] == pytest.approx((now - stuck["lease_expires"]).total_seconds(), abs=2)
    dead = next(w for w in facts.workers if w.worker_id == "worker-dead")
    assert stuck["owner_heartbeat"] == dead.last_heartbeat


def test_workers(reader: Reader, db, facts: SeedFacts) -> None:
    rows = {w["worker_id"]: w for w in reader.workers()}
    now = db_now(db)
    seen = [w for w in facts.workers if w.last_heartbeat > now - timedelta(hours=1)]
    assert set(rows) == {w.worker_id for w in seen}  # worker-old stopped a day ago: hidden
    held = Counter(e.owner_id for e in facts.with_status("running"))
    for w in seen:
        row = rows[w.worker_id]
        assert row["held"] == held.get(w.worker_id, 0)
        assert row["alive"] is (w.stopped_at is None and now - w.last_heartbeat < timedelta(seconds=30))
        assert row["workflows"] == w.workflows and row["hostname"] == w.hostname and row["pid"] == w.pid
        assert row["last_heartbeat"] == w.last_heartbeat
        assert row["heartbeat_age_s"] == pytest.approx((now - w.last_heartbeat).total_seconds(), abs=2)
    assert [w["worker_id"] for w in reader.workers()][:2] == ["worker-a", "worker-b"]  # alive first
    assert rows["worker-dead"]["alive"] is False


def test_unserved_workflows(reader: Reader, db, app: Kestrel, facts: SeedFacts) -> None:
    assert reader.unserved_workflows() == []  # worker-a and worker-b run both workflows
    app.enqueue("orphan", {"x": 1})
    app.enqueue("orphan", {"x": 2})
    rows = reader.unserved_workflows()
    assert [(r["workflow_name"], r["enqueued"]) for r in rows] == [("orphan", 2)]
    # Every worker that ran billing-sync stops: its enqueued rows are unserved too.
    db.execute("UPDATE workers SET stopped_at = now() WHERE worker_id IN ('worker-a', 'worker-b')")
    names = {r["workflow_name"]: r["enqueued"] for r in reader.unserved_workflows()}
    enqueued = Counter(e.workflow_name for e in facts.with_status("enqueued"))
    assert names == {"orphan": 2, **enqueued}


def test_pending_approvals(reader: Reader, db, facts: SeedFacts) -> None:
    rows = reader.pending_approvals()
    expected = facts.pending_approvals()
    assert [(r["execution_id"], r["step_id"]) for r in rows] == [(w.execution_id, w.step_id) for w in expected]
    for row, wait in zip(rows, expected):
        assert row["workflow_name"] == wait.workflow_name
        assert row["waiting_since"] == wait.created_at
        assert row["deadline"] == wait.wake_at
        assert row["details"] == wait.details
    summary = reader.approvals_summary()
    assert summary["count"] == len(expected)
    assert summary["oldest_age_s"] == pytest.approx((db_now(db) - expected[0].created_at).total_seconds(), abs=2)


def test_errors_since(reader: Reader, db, facts: SeedFacts) -> None:
    now = db_now(db)
    for seconds in (3600, 86400 * 4, 86400 * 60):
        expected = sum(1 for e in facts.with_status("error") if e.finished_at >= now - timedelta(seconds=seconds))
        assert reader.errors_since(seconds) == expected
    assert reader.errors_since(3600) == 1  # failed_last_hour only: the rows differ per window


def test_activity_buckets_match_the_seed(reader: Reader, db, facts: SeedFacts) -> None:
    buckets = reader.activity(minutes=60, bucket_s=300)
    assert len(buckets) == 12
    starts = [b["start"] for b in buckets]
    assert all(b - a == timedelta(seconds=300) for a, b in zip(starts, starts[1:]))
    assert starts[-1] <= db_now(db) < starts[-1] + timedelta(seconds=300)

    def count(times: list[datetime | None], start: datetime) -> int:
        return sum(1 for t in times if t is not None and start <= t < start + timedelta(seconds=300))

    runs = list(facts.executions.values())
    for b in buckets:
        assert b["enqueued"] == count([e.created_at for e in runs], b["start"]), b
        assert b["started"] == count([e.started_at for e in runs], b["start"]), b
        assert b["completed"] == count([e.finished_at for e in runs], b["start"]), b
        assert b["failed"] == count([e.finished_at for e in runs if e.status == "error"], b["start"]), b
    assert sum(b["completed"] for b in buckets) > 0 and sum(b["enqueued"] for b in buckets) > 0


# -- executions ----------------------------------------------------------------------------------


def test_list_executions_newest_first_with_filters(reader: Reader, db, facts: SeedFacts) -> None:
    everything = sorted(facts.executions.values(), key=lambda e: -e.id)
    rows = reader.list_executions()
    assert [r["id"] for r in rows] == [e.id for e in everything]
    by_id = {r["id"]: r for r in rows}
    for e in everything:
        row = by_id[e.id]
        assert (row["workflow_name"], row["status"], row["owner_id"], row["error"]) == (
            e.workflow_name,
            e.status,
            e.owner_id,
            e.error,
        )
        assert row["created_at"] == e.created_at and row["finished_at"] == e.finished_at
        if e.finished_at and e.started_at:
            assert row["duration_s"] == pytest.approx((e.finished_at - e.started_at).total_seconds())
        if e.started_at is None:
            assert row["duration_s"] is None
    # current step: the open wait, else the latest attempt
    assert by_id[facts.id("pending_approval")]["current_step"] == "approve-fix"
    assert by_id[facts.id("sleeping")]["current_step"] == "cool-down"
    assert by_id[facts.id("running")]["current_step"] == "post"
    assert by_id[facts.id("stuck")]["current_step"] == "fetch"
    assert by_id[facts.id("enqueued")]["current_step"] is None

    for status in STATUSES:
        assert [r["id"] for r in reader.list_executions(status=status)] == [
            e.id for e in everything if e.status == status
        ]
    assert [r["id"] for r in reader.list_executions(workflow="billing-sync", status="error")] == [
        e.id for e in everything if e.workflow_name == "billing-sync" and e.status == "error"
    ]
    # free text: workflow, owner, error text (case-insensitive), or the id
    assert [r["id"] for r in reader.list_executions(text="UPSTREAM 502")] == [facts.id("failed_last_hour")]
    assert [r["id"] for r in reader.list_executions(text="worker-dead")] == [facts.id("stuck")]
    assert facts.id("quick") in [r["id"] for r in reader.list_executions(text=str(facts.id("quick")))]
    assert [r["id"] for r in reader.list_executions(text="billing")] == [
        e.id for e in everything if "billing" in e.workflow_name
    ]
    assert reader.list_executions(text="%") == []  # no LIKE wildcards
    # paging
    page1 = reader.list_executions(limit=5)
    page2 = reader.list_executions(limit=5, before_id=page1[-1]["id"])
    assert [r["id"] for r in page1 + page2] == [e.id for e in everything[:10]]
    assert [r["id"] for r in reader.list_executions(limit=5, offset=5)] == [r["id"] for r in page2]
    with pytest.raises(ValueError, match="unknown status"):
        reader.list_executions(status="bogus")


def test_execution_steps_and_timeline(reader: Reader, facts: SeedFacts) -> None:
    eid = facts.id("approved")
    seeded = facts.executions["approved"]
    row = reader.execution(eid)
    assert row is not None
    for key in (
        "id",
        "workflow_name",
        "status",
        "input",
        "output",
        "error",
        "owner_id",
        "claims",
        "created_at",
        "started_at",
        "finished_at",
        "run_at",
        "priority",
    ):
        assert row[key] == getattr(seeded, key), key
    assert reader.execution(10_000) is None

    steps = reader.steps(eid)
    outputs = sorted((o for o in facts.outputs if o.label == "approved"), key=lambda o: o.started_at)
    assert [(s["step_id"], s["output"], s["attempts"], s["started_at"], s["finished_at"]) for s in steps] == [
        (o.step_id, o.output, o.attempts, o.started_at, o.created_at) for o in outputs
    ]

    timeline = reader.timeline(eid)
    expected = sorted(
        [
            ("step", a.step_id, a.attempt, a.started_at, a.finished_at, a.outcome, a.error)
            for a in facts.attempts_of("approved")
        ]
        + [
            (
                w.kind,
                w.step_id,
                None,
                w.created_at,
                w.resolved_at,
                w.decision or ("woke" if w.kind == "sleep" else "waiting"),
                None,
            )
            for w in facts.waits_of("approved")
        ],
        key=lambda t: t[3],
    )
    assert [
        (t["kind"], t["step_id"], t["attempt"], t["started_at"], t["finished_at"], t["outcome"], t["error"])
        for t in timeline
    ] == expected
    gate = next(t for t in timeline if t["kind"] == "approval")
    assert (gate["decided_by"], gate["comment"]) == ("alice", "lgtm")
    # failed attempts are there, with their errors
    assert [t["outcome"] for t in timeline if t["step_id"] == "fix"] == ["error", "error", "success"]


def test_timeline_of_a_cancelled_and_a_pending_execution(reader: Reader, facts: SeedFacts) -> None:
    cancelled = reader.timeline(facts.id("cancelled"))
    assert [(t["step_id"], t["outcome"]) for t in cancelled if t["kind"] != "step"] == [("approve-fix", "cancelled")]
    pending = reader.timeline(facts.id("pending_approval"))
    assert pending[-1]["kind"] == "approval" and pending[-1]["outcome"] == "waiting"
    assert pending[-1]["finished_at"] is None and pending[-1]["duration_s"] is None
    running = reader.timeline(facts.id("running"))
    assert running[-1]["outcome"] == "running" and running[-1]["finished_at"] is None


# -- why isn't it running? -----------------------------------------------------------------------


def test_blocker_for_every_seeded_execution(reader: Reader, facts: SeedFacts) -> None:
    b = {label: reader.blocker(facts.id(label)) for label in facts.labels}
    gate = facts.wait("pending_approval", "approve-fix")
    assert b["pending_approval"].startswith("it waits for approval 'approve-fix' since ")
    since = gate.created_at.astimezone(UTC).isoformat(sep=" ", timespec="seconds")
    assert since.replace("+00:00", "Z") in b["pending_approval"]
    assert "deadline" in b["pending_approval"] and "deadline" not in b["pending_approval_old"]
    assert b["sleeping"].startswith("it sleeps ('cool-down') until ")
    assert b["delayed"].startswith("it is scheduled for later: not before ")
    assert "worker 'worker-dead'" in b["stuck"] and "heartbeat stopped 10 m" in b["stuck"]
    assert "lease expired 5 m" in b["stuck"]
    # moving or done: no blocker
    for label in ("enqueued", "enqueued_remediate", "running", "approved", "failed_old", "cancelled"):
        assert b[label] is None, label
    assert reader.blocker(10_000) is None


def test_blocker_no_worker_and_busy_workers(reader: Reader, db, app: Kestrel, facts: SeedFacts) -> None:
    orphan = app.enqueue("orphan")
    assert reader.blocker(orphan) == (
        "no live worker has registered workflow 'orphan' (no worker ever did): "
        "start one that runs it (kestrel-console worker MODULE)"
    )
    db.execute("UPDATE workers SET stopped_at = now() WHERE worker_id IN ('worker-a', 'worker-b')")
    assert reader.blocker(facts.id("enqueued")).startswith(
        "no live worker has registered workflow 'billing-sync': start one"
    )
    db.execute("UPDATE workers SET stopped_at = NULL, concurrency = 1 WHERE worker_id = 'worker-a'")
    # worker-a holds 'running' with its only slot
    assert reader.blocker(facts.id("enqueued")) == (
        "every slot of the 1 live worker(s) running 'billing-sync' is busy (1/1): it waits for a free one"
    )


def test_describe_blocker_running_on_an_unknown_owner() -> None:
    facts = dict(
        status="running",
        workflow_name="w",
        owner_id="ghost",
        owner_known=False,
        lease_expired_for_s=12.0,
        any_workers=0,
        live_workers=0,
    )
    assert describe_blocker(facts) == (
        "its lease is held by 'ghost', which is not a registered worker, and expired 12 s ago: re-enqueue it (e)"
    )
    assert describe_blocker({**facts, "lease_expired_for_s": -3.0}) is None


# -- the dashboard -------------------------------------------------------------------------------


def test_dashboard_equals_the_separate_queries(reader: Reader, facts: SeedFacts) -> None:
    dash = reader.dashboard(minutes=15, bucket_s=60)
    assert dash["status_counts"] == reader.status_counts()
    assert dash["queue_depth"] == reader.queue_depth()
    assert [r["id"] for r in dash["stuck_leases"]] == [r["id"] for r in reader.stuck_leases()]
    assert [w["worker_id"] for w in dash["workers"]] == [w["worker_id"] for w in reader.workers()]
    assert dash["unserved_workflows"] == reader.unserved_workflows()
    assert dash["approvals_summary"]["count"] == reader.approvals_summary()["count"]
    assert dash["errors_last_hour"] == reader.errors_since(3600)
    strip = lambda rows: [{k: v for k, v in r.items()} for r in rows]  # noqa: E731
    assert strip(dash["activity"]) == strip(reader.activity(15, 60))
    assert isinstance(dash["elapsed_ms"], float)


def test_overview_is_one_snapshot_of_the_status_parts(reader: Reader, facts: SeedFacts) -> None:
    o = reader.overview()
    assert o["queue_depth"] == reader.queue_depth()
    assert [(a["execution_id"], a["step_id"]) for a in o["pending_approvals"]] == [
        (a["execution_id"], a["step_id"]) for a in reader.pending_approvals()
    ]
    assert [s["id"] for s in o["stuck_leases"]] == [s["id"] for s in reader.stuck_leases()]


# -- the connection ------------------------------------------------------------------------------


def test_connection_settings_and_reconnect_after_the_server_dropped_it(reader: Reader, db) -> None:
    assert reader.status_counts()["enqueued"] == 0
    rows = db.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'kestrel-console' AND datname = current_database()"
    ).fetchall()
    assert len(rows) == 1
    db.execute("SELECT pg_terminate_backend(%s)", (rows[0][0],))
    wait_until_gone(db, rows[0][0])
    assert reader.status_counts()["enqueued"] == 0  # dropped, reopened, answered
    after = db.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'kestrel-console' AND datname = current_database()"
    ).fetchall()
    assert len(after) == 1 and after[0][0] != rows[0][0]


def test_statement_timeout_cancels_a_blocked_query(dsn: str, db) -> None:
    with Reader(dsn, statement_timeout_ms=200) as reader:
        reader.status_counts()
        with psycopg.connect(dsn) as locker:  # a transaction holding a conflicting lock
            locker.execute("LOCK TABLE kestrel.workflow_executions IN ACCESS EXCLUSIVE MODE")
            # The lock is held throughout: only the statement timeout can end the query.
            with pytest.raises(ReadTimeout, match="took longer than 200 ms"):
                reader.status_counts()
            locker.rollback()
        assert reader.status_counts()["enqueued"] == 0  # same Reader, usable again


def test_cancel_from_another_thread(dsn: str, db) -> None:
    with Reader(dsn, statement_timeout_ms=20_000) as reader:
        reader.status_counts()
        outcome: list[BaseException | dict] = []
        with psycopg.connect(dsn) as locker:
            locker.execute("LOCK TABLE kestrel.workflow_executions IN ACCESS EXCLUSIVE MODE")
            worker = threading.Thread(target=lambda: outcome.append(_capture(reader.status_counts)))
            worker.start()
            wait_until_blocked(db, "kestrel-console")  # it is blocked on the lock now
            reader.cancel()
            worker.join(timeout=10)  # the lock is still held: only the cancel can end the query
            assert not worker.is_alive()
            locker.rollback()
        assert isinstance(outcome[0], ReadTimeout) and "was cancelled" in str(outcome[0])
        assert reader.status_counts()["enqueued"] == 0


def _capture(fn):
    try:
        return fn()
    except BaseException as exc:
        return exc


def test_reader_session_is_read_only(reader: Reader) -> None:
    conn = reader._call("probe", lambda c: c)  # the Reader's own connection
    assert conn.execute("SHOW statement_timeout").fetchone()[0] == "2s"
    assert conn.execute("SHOW default_transaction_read_only").fetchone()[0] == "on"
    assert conn.execute("SHOW jit").fetchone()[0] == "off"
    assert conn.execute("SHOW max_parallel_workers_per_gather").fetchone()[0] == "0"
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute("DELETE FROM kestrel.workers")


def test_unreachable_database_raises_database_unavailable() -> None:
    reader = Reader("host=127.0.0.1 port=1 user=postgres dbname=postgres connect_timeout=2")
    with pytest.raises(DatabaseUnavailable, match="cannot connect to PostgreSQL at postgres@127.0.0.1:1/postgres"):
        reader.status_counts()
    with pytest.raises(DatabaseUnavailable):  # and again: nothing cached
        reader.dashboard()


def test_unmigrated_schema_says_run_migrate(dsn: str) -> None:
    with Reader(dsn, schema="not_migrated") as reader:
        with pytest.raises(SchemaOutdated, match="kestrel-console migrate"):
            reader.status_counts()


# -- plans on a big history ----------------------------------------------------------------------

BULK = 200_000
LIVE = 2_000


@pytest.fixture(scope="module")
def big_history() -> Iterator[str]:
    """A database of its own: the seeded story, 200k finished executions, 2k live, analyzed."""
    with plans.big_history("kestrel_big", BULK, LIVE) as dsn:
        yield dsn


def test_no_refresh_query_scans_workflow_executions_sequentially(big_history: str) -> None:
    with Reader(big_history) as reader, psycopg.connect(big_history, autocommit=True) as conn:
        assert reader.status_counts()["success"] + reader.status_counts()["error"] >= BULK
        scans = seq_scans(conn, reader.refresh_statements())
        bad = {k: v for k, v in scans.items() if "workflow_executions" in v}
        assert bad == {}, f"sequential scans of workflow_executions: {json.dumps(bad)}"
        # How fast the dashboard is on a big history is measured in bench/ (console), not here.


def test_the_activity_plan_estimates_the_window_not_a_third_of_the_history(big_history: str) -> None:
    """The 15-minute window of 200k finishes spread over 30 days holds ~70 of them. Estimated
    as a third of the table (``finished_at >= span.t0``, a value the planner cannot see), the
    plan's cost grew with the history until JIT compiled it, 0.8-4.7 s of every refresh at 10M
    finished executions (issue 22)."""
    with Reader(big_history) as reader, psycopg.connect(big_history, autocommit=True) as conn:
        statement, params = reader.refresh_statements()["activity"]
        plan = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + render(statement, "kestrel"), params).fetchone()[0]
        nodes = as_parents(conn, plan_nodes(plan[0]["Plan"]))
        finished = [n for n in nodes if n.get("Index Name") == "workflow_executions_finished_idx"]
        assert finished and all(n["Plan Rows"] < BULK / 100 for n in finished), finished
        assert plan[0]["Plan"]["Total Cost"] < 10_000


def test_recent_failures_are_counted_from_the_failures_alone(big_history: str) -> None:
    """Not by reading every execution finished in the hour (migration 0018)."""
    with Reader(big_history) as reader, psycopg.connect(big_history, autocommit=True) as conn:
        statement, params = reader.refresh_statements()["errors_since"]
        plan = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + render(statement, "kestrel"), params).fetchone()[0]
        used = {n.get("Index Name") for n in as_parents(conn, plan_nodes(plan[0]["Plan"]))} - {None}
        assert used == {"workflow_executions_failed_idx"}, used


# Each index the refresh queries rely on: dropping it (in a transaction, rolled back) must
# make some refresh query fall back to a sequential scan, so the test above would catch it.
INDEXES = [
    ("workflow_executions_enqueued_idx",),
    ("workflow_executions_running_owner_idx",),
    ("workflow_executions_waiting_idx",),
    ("workflow_executions_finished_idx",),
    ("workflow_executions_finished_status_idx",),
    ("workflow_executions_name_idx",),
]


@pytest.mark.parametrize("dropped", INDEXES, ids=lambda d: "+".join(d))
def test_dropping_an_index_is_caught(big_history: str, dropped: tuple[str, ...]) -> None:
    with Reader(big_history) as reader, psycopg.connect(big_history) as conn:
        for name in dropped:
            conn.execute(sql.SQL("DROP INDEX kestrel.{}").format(sql.Identifier(name)))
        try:
            scans = seq_scans(conn, reader.refresh_statements())
        finally:
            conn.rollback()
        assert any("workflow_executions" in v for v in scans.values()), scans


def test_the_search_keys_are_served_by_their_indexes(big_history: str) -> None:
    """id: by a primary key, key: by execution_keys, input.x= by the input's GIN index
    (migration 0025), on the 200k history (issue 46)."""
    with Reader(big_history) as reader, psycopg.connect(big_history, autocommit=True) as conn:
        statements = reader.search_statements(execution_id=100, key="k-1", input_filter="input.n=77")
        wanted = {
            "list_executions[id]": "_pkey",
            "list_executions[key]": "execution_keys_pkey",
            "list_executions[input]": "_input_idx",
        }
        for name, index in wanted.items():
            statement, params = statements[name]
            plan = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + render(statement, "kestrel"), params).fetchone()[0]
            used = {n.get("Index Name") or "" for n in plan_nodes(plan[0]["Plan"])}
            assert any(u.endswith(index) for u in used), (name, used)
        rows = reader.list_executions(where=parse_filter("input.n=77"))  # one finished, one enqueued
        assert [r["workflow_name"] for r in rows] == ["bulk", "bulk"] and reader.estimate_executions(
            parse_filter("input.n=77")
        ) < 100
