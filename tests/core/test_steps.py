"""Steps and checkpoints: run once, replay from checkpoints, retries, failures, async."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from kestrel_core import Kestrel, StepFailed
from kestrel_core.engine.worker import Worker
from tests.core.conftest import ledger_rows
from tests.waiting import wait_finished as finished
from tests.waiting import wait_for


def test_steps_run_once_and_output_is_checkpointed(app: Kestrel, ledger, start_worker) -> None:
    def side_effect(eid: int, step: str, value):
        ledger.execute("INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, %s)", (eid, step))
        return value

    @app.workflow("two")
    def two(ctx, x):
        a = ctx.step("a", side_effect, ctx.execution_id, "a", x + 1)
        b = ctx.step("b", side_effect, ctx.execution_id, "b", {"a": a, "t": (1, 2)})
        return {"a": a, "b": b}

    start_worker(app)
    eid = app.enqueue("two", 41)
    done = finished(app, eid)
    assert done.status == "success"
    assert done.output == {"a": 42, "b": {"a": 42, "t": [1, 2]}}
    assert ledger_rows(ledger, eid) == [(eid, "a"), (eid, "b")]
    rows = ledger.execute(
        "SELECT step_id, output, attempts, started_at <= created_at FROM operation_outputs"
        " WHERE execution_id = %s ORDER BY created_at",
        (eid,),
    ).fetchall()
    assert rows == [("a", 42, 1, True), ("b", {"a": 42, "t": [1, 2]}, 1, True)]


def test_replay_returns_checkpoints_without_running(app: Kestrel, ledger, start_worker) -> None:
    """A requeued execution replays: checkpointed steps return stored output, not run again."""
    runs = {"b": 0}

    def flaky_b():
        runs["b"] += 1
        if runs["b"] == 1:
            raise RuntimeError("first run of b fails")
        return "b-ok"

    @app.workflow("replay")
    def replay(ctx, _):
        a = ctx.step(
            "a",
            lambda: ledger.execute(
                "INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, 'a') RETURNING id", (ctx.execution_id,)
            ).fetchone()[0],
        )
        return [a, ctx.step("b", flaky_b)]

    start_worker(app)
    eid = app.enqueue("replay")
    first = finished(app, eid)
    assert first.status == "error" and "step 'b' failed once: RuntimeError: first run of b fails" in first.error
    app.requeue(eid, by="test")
    second = finished(app, eid)
    assert second.status == "success"
    assert second.output[1] == "b-ok"
    assert ledger_rows(ledger, eid) == [(eid, "a")]  # a was not run again
    attempts = ledger.execute(
        "SELECT step_id, attempt, outcome FROM step_attempts WHERE execution_id = %s ORDER BY started_at, id", (eid,)
    ).fetchall()
    assert attempts == [("a", 1, "success"), ("b", 1, "error"), ("b", 2, "success")]


def test_retries_with_backoff_then_success(app: Kestrel, db, start_worker) -> None:
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError(f"try {len(calls)}")
        return "ok"

    @app.workflow
    def retrying(ctx, _):
        return ctx.step("call", flaky, retries=3, backoff=0.05)

    start_worker(app)
    eid = app.enqueue("retrying")
    assert finished(app, eid).output == "ok"
    rows = db.execute(
        "SELECT attempt, outcome, split_part(error, E'\\n', 1) FROM step_attempts"
        " WHERE execution_id = %s ORDER BY attempt",
        (eid,),
    ).fetchall()
    assert rows == [
        (1, "error", "ConnectionError: try 1"),
        (2, "error", "ConnectionError: try 2"),
        (3, "success", None),
    ]
    assert db.execute("SELECT attempts FROM operation_outputs WHERE execution_id = %s", (eid,)).fetchone() == (3,)


def test_exhausted_retries_fail_the_workflow_with_the_error(app: Kestrel, db, start_worker) -> None:
    @app.workflow
    def doomed(ctx, _):
        return ctx.step("explode", lambda: 1 / 0, retries=2, backoff=0.01)

    start_worker(app)
    eid = app.enqueue("doomed")
    done = finished(app, eid)
    assert done.status == "error"
    assert done.error.startswith("StepFailed: step 'explode' failed 3 times: ZeroDivisionError: division by zero")
    assert "Traceback" in done.error
    stored = db.execute("SELECT output, error FROM operation_outputs WHERE execution_id = %s", (eid,)).fetchone()
    assert stored[0] is None and stored[1].startswith("ZeroDivisionError: division by zero")
    assert db.execute("SELECT count(*) FROM step_attempts WHERE execution_id = %s", (eid,)).fetchone() == (3,)


def test_a_workflow_can_catch_a_failed_step(app: Kestrel, start_worker) -> None:
    @app.workflow
    def careful(ctx, _):
        try:
            ctx.step("bad", lambda: {}["missing"])
        except StepFailed as exc:
            return {"recovered_from": exc.step_id, "error": exc.error}

    start_worker(app)
    done = finished(app, app.enqueue("careful"))
    assert done.status == "success"
    assert done.output == {"recovered_from": "bad", "error": "KeyError: 'missing'"}


def test_non_json_step_output_fails_naming_step_and_type(app: Kestrel, db, start_worker) -> None:
    calls = []

    @app.workflow
    def leaky(ctx, _):
        return ctx.step("make-set", lambda: calls.append(1) or {1, 2}, retries=3)

    start_worker(app)
    done = finished(app, app.enqueue("leaky"))
    assert done.status == "error"
    assert "the output of step 'make-set'" in done.error and "type set" in done.error
    assert len(calls) == 1  # not retried: the same code returns the same type


def test_duplicate_step_id_is_a_clear_error(app: Kestrel, start_worker) -> None:
    @app.workflow
    def loop(ctx, _):
        return [ctx.step("fetch", lambda i=i: i) for i in range(2)]

    start_worker(app)
    done = finished(app, app.enqueue("loop"))
    assert done.status == "error"
    assert "DuplicateStepId: step id 'fetch' is used twice" in done.error


def test_exception_outside_a_step_fails_with_traceback(app: Kestrel, start_worker) -> None:
    @app.workflow
    def broken(ctx, x):
        ctx.step("ok", lambda: 1)
        raise ValueError(f"bad input {x}")

    start_worker(app)
    done = finished(app, app.enqueue("broken", 7))
    assert done.status == "error"
    assert done.error.startswith("ValueError: bad input 7")
    assert "Traceback" in done.error


def test_non_json_workflow_output_is_an_error(app: Kestrel, start_worker) -> None:
    @app.workflow
    def returns_bytes(ctx, _):
        return b"raw"

    start_worker(app)
    done = finished(app, app.enqueue("returns_bytes"))
    assert done.status == "error"
    assert "output of workflow 'returns_bytes'" in done.error and "type bytes" in done.error


def test_async_workflow_with_coroutine_and_plain_steps(app: Kestrel, start_worker) -> None:
    async def double(v):
        await asyncio.sleep(0.01)
        return v * 2

    @app.workflow
    async def pipeline(ctx, x):
        a = await ctx.step("double", double, x)
        b = await ctx.step("inc", lambda v: v + 1, a)
        await ctx.sleep("pause", 0.2)
        return {"a": a, "b": b}

    start_worker(app)
    done = finished(app, app.enqueue("pipeline", 20))
    assert (done.status, done.output) == ("success", {"a": 40, "b": 41})


def test_worker_claims_only_registered_names(app: Kestrel, dsn: str, start_worker) -> None:
    @app.workflow
    def known(ctx, _):
        return "ran"

    start_worker(app)
    unknown = app.enqueue("nobody-runs-this")
    ran = app.enqueue("known")
    assert finished(app, ran).output == "ran"
    assert app.get(unknown).status == "enqueued"


def test_concurrent_workers_never_run_the_same_execution(dsn: str, ledger) -> None:
    """Three workers (own apps and pools) polling the same queue: each execution runs once."""
    workers: list[Worker] = []
    apps = [Kestrel(dsn) for _ in range(3)]
    for i, app in enumerate(apps):

        @app.workflow("count")
        def count(ctx, _, i=i):
            return ctx.step(
                "hit",
                lambda: ledger.execute(
                    "INSERT INTO public.ledger (execution_id, step_id, worker) VALUES (%s, 'hit', %s) RETURNING id",
                    (ctx.execution_id, f"w{i}"),
                ).fetchone()[0],
            )

        workers.append(app.worker(concurrency=4, poll_interval=0.05, listen=False, lease=timedelta(seconds=10)))
    try:
        for w in workers:
            w.start()
        ids = apps[0].enqueue_many("count", [None] * 300)
        wait_for(
            lambda: ledger.execute(
                "SELECT count(*) = 300 FROM workflow_executions WHERE status = 'success'"
            ).fetchone()[0],
            timeout=60,
            what="300 executions to succeed",
        )
    finally:
        for w in workers:
            w.stop(grace=timedelta(0))
        for app in apps:
            app.close()
    per_execution = ledger.execute(
        "SELECT execution_id, count(*) FROM public.ledger GROUP BY 1 HAVING count(*) > 1"
    ).fetchall()
    assert per_execution == []
    assert ledger.execute("SELECT count(DISTINCT execution_id) FROM public.ledger").fetchone()[0] == len(ids)
    used = ledger.execute("SELECT count(DISTINCT worker) FROM public.ledger").fetchone()[0]
    assert used >= 2, "the work should have been shared"


def test_nan_and_deeply_nested_step_outputs_fail_clearly(app: Kestrel, start_worker) -> None:
    def deep():
        value: list = []
        for _ in range(1000):
            value = [value]
        return value

    @app.workflow
    def nan(ctx, _):
        return ctx.step("ratio", lambda: float("nan"))

    @app.workflow
    def nested(ctx, _):
        return ctx.step("deep", deep)

    start_worker(app)
    a, b = app.enqueue("nan"), app.enqueue("nested")
    assert "step 'ratio'" in finished(app, a).error and "float nan" in finished(app, a).error
    assert "step 'deep'" in finished(app, b).error and "nested more than 500 levels" in finished(app, b).error


def test_worker_survives_unexpected_database_errors(app: Kestrel, db, start_worker) -> None:
    """A runner thread that hits an unexpected error (here: a table renamed under it) logs it
    and lives on; the execution's lease lapses and it is retried once the table is back."""

    @app.workflow
    def one_step(ctx, _):
        return ctx.step("only", lambda: "done")

    worker = start_worker(app, concurrency=2)
    db.execute("ALTER TABLE step_attempts RENAME TO step_attempts_away")
    try:
        eid = app.enqueue("one_step")
        wait_for(lambda: worker.stats["claimed"] >= 1 and eid not in worker._inflight, what="the crash")
    finally:
        db.execute("ALTER TABLE step_attempts_away RENAME TO step_attempts")
    done = finished(app, eid, timeout=20)
    assert (done.status, done.output) == ("success", "done")
    assert sum(t.is_alive() for t in worker._threads if t.name.startswith("kestrel-runner")) == 2
