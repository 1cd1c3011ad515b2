"""Group commit: boundaries of several executions go in one statement, each execution learns
its own outcome, a bad row fails only itself, and a step's deferred checkpoint is not lost on
a graceful shutdown."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from kestrel_core import Kestrel
from kestrel_core.base.serialization import as_stored, to_json
from kestrel_core.dispatch.claim import claim
from kestrel_core.dispatch.sweeper import sweep_leases
from kestrel_core.durable.boundary import Attempt, Boundary, Completion, Finish, Outcome
from kestrel_core.durable.group_commit import GroupCommit

from ..waiting import wait_for
from .conftest import ledger_rows

S = "kestrel"


class HeldWriter:
    """Runs each batch on a real connection, but holds the first batch until released, so the
    test decides which boundaries queue up behind it (they form the next batch)."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.release = threading.Event()
        self.entered = threading.Event()
        self.batches: list[list[int]] = []

    def run(self, fn: Callable[[psycopg.Connection], Any]) -> Any:
        self.entered.set()
        self.release.wait(10)
        return fn(self.conn)


@pytest.fixture
def writer(dsn: str) -> Iterator[HeldWriter]:
    w = HeldWriter(dsn)
    yield w
    w.release.set()
    w.conn.close()


def submit_in_thread(group: GroupCommit, b: Boundary, after: Any = None) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def go() -> None:
        try:
            box["outcome"] = group.submit(b, after=after)
        except Exception as exc:  # handed to the test
            box["error"] = exc

    thread = threading.Thread(target=go)
    thread.start()
    return thread, box


Submitted = tuple[threading.Thread, dict[str, Any]]


def behind_a_held_batch(
    writer: HeldWriter, first: Boundary, queue_up: Callable[[GroupCommit], list[Submitted]], queued: int
) -> tuple[GroupCommit, list[dict[str, Any]]]:
    """On a new group commit, submit ``first`` and hold its batch in the writer;
    ``queue_up(group)`` then queues boundaries behind it; once ``queued`` items wait, release
    the writer and stop the group. The group and the boxes, ``first``'s first."""
    group = GroupCommit(writer.run, S).start()
    try:
        submitted = [submit_in_thread(group, first)]
        assert writer.entered.wait(10)  # the first batch is in flight, holding the writer
        submitted += queue_up(group)
        wait_for(lambda: group._queue.qsize() == queued, what=f"{queued} items queued behind the batch in flight")
        writer.release.set()
        for thread, _ in submitted:
            thread.join(10)
    finally:
        group.stop()
    return group, [box for _, box in submitted]


def each_queued(*boundaries: Boundary) -> Callable[[GroupCommit], list[Submitted]]:
    """A ``queue_up`` for ``behind_a_held_batch``: these boundaries, each from its own thread."""
    return lambda group: [submit_in_thread(group, b) for b in boundaries]


def test_boundaries_queued_behind_a_batch_go_together_and_each_gets_its_outcome(
    app: Kestrel, db: psycopg.Connection, writer: HeldWriter
) -> None:
    first, kept, fenced = (app.enqueue("w") for _ in range(3))
    held = {c.execution_id: c for c in claim(db, S, worker_id="w1", names=["w"], n=3, lease=timedelta(seconds=30))}
    # `fenced` is swept and reclaimed by another worker: w1's claim on it is stale.
    db.execute("UPDATE workflow_executions SET lease_expires = now() - interval '1 s' WHERE id = %s", (fenced,))
    assert sweep_leases(db, S) == [fenced]
    assert claim(db, S, worker_id="w2", names=["w"], n=1, lease=timedelta(seconds=30))[0].execution_id == fenced

    done = Completion("success", Jsonb("done"))
    group, (box1, box2, box3) = behind_a_held_batch(
        writer,
        Boundary(first, "w1", held[first].claim_epoch, open_step="a"),
        each_queued(
            Boundary(kept, "w1", held[kept].claim_epoch, complete=done),
            Boundary(fenced, "w1", held[fenced].claim_epoch, complete=done),
        ),
        queued=2,
    )
    assert group.stats == {"batches": 2, "boundaries": 3, "largest": 2}
    assert box1["outcome"].held and box1["outcome"].opened.number == 1
    assert box2["outcome"].completed and box2["outcome"].held
    assert box3["outcome"] == Outcome(held=False)
    assert app.get(kept).status == "success" and app.get(kept).output == "done"
    row = db.execute("SELECT status, owner_id, output FROM workflow_executions WHERE id = %s", (fenced,)).fetchone()
    assert row == ("running", "w2", None)


def test_a_row_the_database_refuses_fails_only_its_own_execution(
    app: Kestrel, db: psycopg.Connection, writer: HeldWriter
) -> None:
    blocker, good, bad = (app.enqueue("w") for _ in range(3))
    held = {c.execution_id: c for c in claim(db, S, worker_id="w1", names=["w"], n=3, lease=timedelta(seconds=30))}
    _, (_, ok, ko) = behind_a_held_batch(
        writer,
        Boundary(blocker, "w1", held[blocker].claim_epoch, open_step="a"),
        each_queued(
            Boundary(good, "w1", held[good].claim_epoch, complete=Completion("error", error="plain error")),
            # Postgres text cannot hold NUL: this row makes the whole statement fail.
            Boundary(bad, "w1", held[bad].claim_epoch, complete=Completion("error", error="bad \x00 byte")),
        ),
        queued=2,
    )
    assert ok["outcome"].completed
    assert isinstance(ko["error"], psycopg.DataError)
    assert [app.get(good).status, app.get(bad).status] == ["error", "running"]


def test_batches_form_under_load_and_every_execution_completes(
    app: Kestrel, db: psycopg.Connection, start_worker: Any, ledger: Any, request: pytest.FixtureRequest
) -> None:
    # A session for each step that runs at once (not one shared, which would take the steps
    # one at a time; not one per step, 180 new sessions).
    sessions = ConnectionPool(
        app.dsn, min_size=1, max_size=12, kwargs={"autocommit": True, "prepare_threshold": None}, open=True
    )
    request.addfinalizer(sessions.close)

    def record(eid: int, step: str) -> str:
        with sessions.connection() as conn:
            conn.execute("INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, %s)", (eid, step))
        return step

    @app.workflow("three")
    def three(ctx: Any, _input: Any) -> list[str]:
        return [ctx.step(s, record, ctx.execution_id, s) for s in ("a", "b", "c")]

    ids = [app.enqueue("three") for _ in range(60)]
    worker = start_worker(app, concurrency=12)
    wait_for(
        lambda: db.execute("SELECT count(*) FROM workflow_executions WHERE status = 'success'").fetchone()[0] == 60,
        timeout=60,
        what="all 60 executions to succeed",
    )
    # A batch is counted once its statement returned, a moment after its commit can be seen.
    wait_for(lambda: worker._group.stats["boundaries"] >= 60 * 3, what="the last batch to be counted")
    # open a (lazily: with a's end when that comes first); a + open b; b + open c; c + complete
    assert 60 * 3 <= worker._group.stats["boundaries"] <= 60 * 4
    assert worker._group.stats["batches"] < worker._group.stats["boundaries"]
    assert db.execute("SELECT count(*) FROM operation_outputs").fetchone()[0] == 180
    assert db.execute("SELECT count(*), max(attempt) FROM step_attempts WHERE outcome = 'success'").fetchone() == (
        180,
        1,
    )
    assert (
        db.execute(
            "SELECT count(*) FROM step_attempts WHERE finished_at < started_at OR outcome <> 'success'"
        ).fetchone()[0]
        == 0
    )
    assert len(ledger_rows(db)) == 180 and {app.get(i).output == ["a", "b", "c"] for i in ids} == {True}


def test_a_graceful_shutdown_writes_the_last_steps_checkpoint(
    app: Kestrel, db: psycopg.Connection, start_worker: Any, ledger: Any
) -> None:
    between = threading.Event()
    go_on = threading.Event()

    def record(eid: int, step: str) -> str:
        with psycopg.connect(app.dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, %s)", (eid, step))
        return step

    @app.workflow("two")
    def two(ctx: Any, _input: Any) -> str:
        ctx.step("a", record, ctx.execution_id, "a")
        between.set()
        go_on.wait(10)  # workflow code between steps: a's checkpoint is not written yet
        return ctx.step("b", record, ctx.execution_id, "b")

    eid = app.enqueue("two")
    worker = start_worker(app)
    assert between.wait(15)
    stopping = threading.Thread(target=worker.stop, kwargs={"grace": timedelta(seconds=5)})
    stopping.start()
    wait_for(worker.draining.is_set, what="the worker to start draining")
    go_on.set()
    stopping.join(15)
    assert db.execute("SELECT step_id FROM operation_outputs WHERE execution_id = %s", (eid,)).fetchall() == [("a",)]
    assert app.get(eid).status == "enqueued"  # handed back at once
    start_worker(app)
    wait_for(lambda: app.get(eid).status == "success", what="the execution to finish on a new worker")
    assert ledger_rows(db, eid) == [(eid, "a"), (eid, "b")]  # a ran once


def test_a_step_output_reads_the_same_on_its_first_run_as_on_a_replay(db: psycopg.Connection) -> None:
    value = {"zz": 1, "a": [1, (2, 3)], "bb": {"é": None, "b": True, "aaa": 1.5}, "": "empty"}
    stored = db.execute("SELECT %s::jsonb", (to_json(value, "test"),)).fetchone()[0]
    assert as_stored(to_json(value, "test")) == stored
    assert list(as_stored(to_json(value, "test"))) == list(stored)
    assert list(as_stored(to_json(value, "test"))["bb"]) == list(stored["bb"])


def test_outputs_with_an_arrays_special_characters_are_stored_as_written(
    app: Kestrel, db: psycopg.Connection, start_worker: Any
) -> None:
    # The boundary sends outputs and results as jsonb arrays in binary: quotes, backslashes,
    # braces, commas and a string that reads NULL are data, not array syntax.
    tricky = {'q"uote': 'a"b', "back\\slash": "c\\d", "{brace}": "{1,2}", "comma,": "NULL", "é": '\\"}'}

    @app.workflow("tricky")
    def tricky_flow(ctx, _input):
        first = ctx.step("first", lambda: tricky)
        return [first, ctx.step("second", lambda: ["NULL", None, '"', "\\"])]

    start_worker(app)
    eid = app.enqueue("tricky")
    wait_for(lambda: app.get(eid).done, what="the execution to finish")
    assert app.get(eid).output == [tricky, ["NULL", None, '"', "\\"]]
    stored = db.execute(
        "SELECT step_id, output FROM operation_outputs WHERE execution_id = %s ORDER BY step_id", (eid,)
    ).fetchall()
    assert stored == [("first", tricky), ("second", ["NULL", None, '"', "\\"])]


def test_a_quick_first_step_is_written_start_and_end_in_one_row(
    app: Kestrel, db: psycopg.Connection, writer: HeldWriter
) -> None:
    blocker, eid = app.enqueue("w"), app.enqueue("w")
    held = {c.execution_id: c for c in claim(db, S, worker_id="w1", names=["w"], n=2, lease=timedelta(seconds=30))}
    lazy: list[Any] = []

    def start_and_end(group: GroupCommit) -> list[Submitted]:  # a quick step: its start and end queue up together
        lazy.append(group.open_lazily(Boundary(eid, "w1", held[eid].claim_epoch, open_step="a")))
        end = Boundary(
            eid,
            "w1",
            held[eid].claim_epoch,
            finish=Finish("a", Attempt(1, None), Jsonb("x"), position=1),
            complete=Completion("success", Jsonb("done")),
        )
        return [submit_in_thread(group, end, after=lazy[0])]

    group, (_, box) = behind_a_held_batch(
        writer, Boundary(blocker, "w1", held[blocker].claim_epoch, open_step="a"), start_and_end, queued=2
    )
    assert "error" not in box, box
    outcome = box["outcome"]
    assert outcome.held and outcome.completed and outcome.checkpoint == ("x", None, 1)
    assert lazy[0].done.is_set() and lazy[0].outcome == outcome
    assert group.stats == {"batches": 2, "boundaries": 2, "largest": 1}  # start + end: one row
    rows = db.execute(
        "SELECT attempt, outcome, started_at <= finished_at FROM step_attempts WHERE execution_id = %s", (eid,)
    ).fetchall()
    assert rows == [(1, "success", True)]
    assert app.get(eid).status == "success"


def test_a_slow_first_step_shows_as_running_then_ends_in_the_same_row(
    app: Kestrel, db: psycopg.Connection, start_worker: Any
) -> None:
    release = threading.Event()
    calls = {"flaky": 0}

    def flaky() -> str:
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise RuntimeError("first attempt fails")
        return "ok"

    @app.workflow("slow-first")
    def slow_first(ctx: Any, _input: Any) -> str:
        ctx.step("wait", release.wait, 20)
        return "done"

    @app.workflow("flaky-first")
    def flaky_first(ctx: Any, _input: Any) -> str:
        return ctx.step("flaky", flaky, retries=1, backoff=0.01)

    slow, retried = app.enqueue("slow-first"), app.enqueue("flaky-first")
    start_worker(app)
    wait_for(
        lambda: db.execute(
            "SELECT 1 FROM step_attempts WHERE execution_id = %s AND outcome = 'running'", (slow,)
        ).fetchone(),
        what="the slow first step's start to be written while it runs",
    )
    release.set()
    wait_for(lambda: app.get(slow).done and app.get(retried).done, what="both executions to finish")
    assert [app.get(slow).status, app.get(retried).output] == ["success", "ok"]
    attempts = db.execute(
        "SELECT execution_id, step_id, attempt, outcome FROM step_attempts ORDER BY started_at, id"
    ).fetchall()
    assert sorted(attempts) == sorted(
        [(slow, "wait", 1, "success"), (retried, "flaky", 1, "error"), (retried, "flaky", 2, "success")]
    )
