"""OpenTelemetry traces (issue 47), collected by the SDK's exporters: one trace from the request
that enqueued to the workflow's last step, in one process (InMemorySpanExporter) and across
processes (a worker subprocess writes its spans to a file); a failed attempt is an error span,
a replayed step makes none, each run of an execution (before and after a durable sleep) is a
span under the enqueue's; with tracing off nothing is recorded and the engine runs without
OpenTelemetry installed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kestrel_core import Kestrel, disable_tracing, enable_tracing
from kestrel_core.engine.worker import Worker
from tests.core.span_record import as_dict
from tests.waiting import wait_for
from tests.worker_processes import ROOT, start_worker_process, stop_worker_processes


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    enable_tracing(provider)
    try:
        yield provider, exporter
    finally:
        disable_tracing()


@dataclass
class Traced:
    """The app traced into ``exporter``, with a worker to start."""

    app: Kestrel
    db: psycopg.Connection
    provider: TracerProvider
    exporter: InMemorySpanExporter
    start_worker: Callable[..., Worker]

    def run(self, request: str, workflow: str, input: Any, what: str) -> tuple[int, Any]:
        """Start a worker, enqueue under the span ``request`` and wait for the execution to
        succeed: (its id, the request's span)."""
        self.start_worker(self.app)
        with self.provider.get_tracer("web").start_as_current_span(request) as span:
            eid = self.app.enqueue(workflow, input)
        wait_for(lambda: status_of(self.db, eid) == "success", what=what)
        return eid, span


@pytest.fixture
def traced(
    app: Kestrel,
    db: psycopg.Connection,
    spans: tuple[TracerProvider, InMemorySpanExporter],
    start_worker: Callable[..., Worker],
) -> Traced:
    return Traced(app, db, *spans, start_worker)


def status_of(db: psycopg.Connection, eid: int) -> str:
    return db.execute("SELECT status FROM kestrel.workflow_executions WHERE id = %s", (eid,)).fetchone()[0]


def by_name(found: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for span in found:
        out.setdefault(span["name"], []).append(span)
    return out


def check_one_trace(found: list[dict[str, Any]], request: dict[str, Any]) -> None:
    """The spans of the traced_app workflow, enqueued under ``request``: one trace."""
    assert {s["trace_id"] for s in found} == {request["trace_id"]}, found
    named = by_name(found)
    (enqueue,) = named["kestrel.enqueue remediate"]
    assert enqueue["parent_id"] == request["span_id"] and enqueue["kind"] == "PRODUCER"
    runs = named["kestrel.workflow remediate"]
    # Two runs: up to the durable sleep (parked), then after it (returned); both under the enqueue.
    assert sorted(r["attributes"]["kestrel.outcome"] for r in runs) == ["parked", "returned"], runs
    assert all(r["parent_id"] == enqueue["span_id"] and r["kind"] == "CONSUMER" for r in runs)
    assert {r["attributes"]["kestrel.execution_id"] for r in runs} == {enqueue_id(found)}
    first = next(r for r in runs if r["attributes"]["kestrel.outcome"] == "parked")
    second = next(r for r in runs if r["attributes"]["kestrel.outcome"] == "returned")
    # rca ran in the first run; replayed from its checkpoint in the second, it makes no span.
    (rca,) = named["kestrel.step rca"]
    assert rca["parent_id"] == first["span_id"] and rca["status"] == "UNSET"
    fix = sorted(named["kestrel.step fix"], key=lambda s: s["attributes"]["kestrel.attempt"])
    assert [(s["attributes"]["kestrel.attempt"], s["status"]) for s in fix] == [(1, "ERROR"), (2, "UNSET")]
    assert fix[0]["events"] == ["exception"]
    (last,) = named["kestrel.step open-pr"]
    assert all(s["parent_id"] == second["span_id"] for s in [*fix, last])


def enqueue_id(found: list[dict[str, Any]]) -> int:
    (run, *_) = [s for s in found if s["name"].startswith("kestrel.workflow")]
    return run["attributes"]["kestrel.execution_id"]


def test_one_trace_from_the_request_to_the_last_step_in_one_process(traced: Traced) -> None:
    app, db, exporter = traced.app, traced.db, traced.exporter
    failed_once: list[bool] = []

    def flaky() -> str:
        if not failed_once:
            failed_once.append(True)
            raise RuntimeError("first attempt fails")
        return "fixed"

    @app.workflow("remediate")
    def remediate(ctx: Any, alert: dict[str, str]) -> dict[str, Any]:
        rca = ctx.step("rca", lambda: {"pod": alert["pod"]})
        ctx.sleep("cool-down", timedelta(milliseconds=200))
        fix = ctx.step("fix", flaky, retries=2, backoff=0.05)
        return {"rca": rca, "fix": fix, "pr": ctx.step("open-pr", lambda: "pr-42")}

    eid, request = traced.run("POST /alerts", "remediate", {"pod": "api-1"}, "the traced execution to succeed")
    stored = db.execute("SELECT trace_context FROM kestrel.workflow_executions WHERE id = %s", (eid,)).fetchone()[0]
    assert stored.startswith(f"00-{request.get_span_context().trace_id:032x}-")
    wait_for(lambda: any(s.name == "kestrel.step open-pr" for s in exporter.get_finished_spans()), what="the spans")
    found = [as_dict(s) for s in exporter.get_finished_spans() if s.name != "POST /alerts"]
    check_one_trace(found, as_dict(next(s for s in exporter.get_finished_spans() if s.name == "POST /alerts")))


def test_one_trace_across_processes(
    app: Kestrel, db: psycopg.Connection, dsn: str, spans: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path
) -> None:
    provider, exporter = spans
    with provider.get_tracer("web").start_as_current_span("POST /alerts"):
        eid = app.enqueue("remediate", {"pod": "api-1"})
    span_file = tmp_path / "worker-spans.jsonl"
    worker = start_worker_process(
        dsn, "tests.core.traced_app:app", "--processes", "1", env={"KESTREL_TEST_SPANS": str(span_file)}
    )
    try:
        wait_for(lambda: status_of(db, eid) == "success", timeout=60, what="the worker process to run it")
    finally:
        stop_worker_processes([worker])
    here = [as_dict(s) for s in exporter.get_finished_spans()]
    there = [json.loads(line) for line in span_file.read_text().splitlines()]
    assert {s["pid"] for s in there} != {s["pid"] for s in here}
    request = next(s for s in here if s["name"] == "POST /alerts")
    check_one_trace([s for s in here if s is not request] + there, request)


def test_off_records_nothing_and_stores_no_context(app: Kestrel, db: psycopg.Connection) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("web").start_as_current_span("POST /alerts"):
        eid = app.enqueue("remediate", {"pod": "api-1"})
        many = app.enqueue_many("remediate", [{"n": 1}, {"n": 2}])
    contexts = db.execute(
        "SELECT trace_context FROM kestrel.workflow_executions WHERE id = ANY(%s)", ([eid, *many],)
    ).fetchall()
    assert contexts == [(None,)] * 3
    assert [s.name for s in exporter.get_finished_spans()] == ["POST /alerts"]


def test_enqueue_many_and_the_callers_own_transaction_carry_the_context(
    app: Kestrel, db: psycopg.Connection, dsn: str, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    with provider.get_tracer("web").start_as_current_span("POST /batch") as request, psycopg.connect(dsn) as conn:
        many = app.enqueue_many("remediate", [{"n": 1}, {"n": 2}])
        inside = app.enqueue("remediate", {"n": 3}, conn=conn)
        conn.commit()
    trace_id = f"{request.get_span_context().trace_id:032x}"
    rows = dict(
        db.execute(
            "SELECT id, trace_context FROM kestrel.workflow_executions WHERE id = ANY(%s)", ([*many, inside],)
        ).fetchall()
    )
    assert all(tp.startswith(f"00-{trace_id}-") for tp in rows.values()), rows
    assert rows[many[0]] == rows[many[1]] != rows[inside]  # one enqueue span per call
    enqueues = [s for s in exporter.get_finished_spans() if s.name == "kestrel.enqueue remediate"]
    assert sorted(s.attributes["kestrel.count"] for s in enqueues) == [1, 2]


def test_the_engine_runs_without_opentelemetry_installed(dsn: str) -> None:
    """OpenTelemetry made unimportable: kestrel_core imports, enqueues, and enable_tracing
    says what to install."""
    script = f"""
import sys
sys.modules["opentelemetry"] = None  # as if not installed: any import of it raises ImportError
from kestrel_core import Kestrel, TracingUnavailable, enable_tracing
with Kestrel({dsn!r}) as app:
    eid = app.enqueue("remediate", {{"pod": "api-1"}})
    assert app.get(eid).status == "enqueued"
try:
    enable_tracing()
except TracingUnavailable as exc:
    print(exc)
assert not any(m == "opentelemetry" or m.startswith("opentelemetry.") for m in sys.modules if sys.modules[m])
"""
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "tracing needs OpenTelemetry, which is not installed: pip install 'kestrel[otel]'\n"


def test_an_async_workflows_steps_are_spans_of_its_run(traced: Traced) -> None:
    import asyncio

    app, exporter = traced.app, traced.exporter

    async def fetch(n: int) -> int:
        await asyncio.sleep(0.01)
        return n

    def boom() -> None:
        raise ValueError("no")

    @app.workflow("gather")
    async def gather(ctx: Any, n: int) -> list[int]:
        parts = await asyncio.gather(*(ctx.step(f"fetch-{i}", fetch, i) for i in range(n)))
        try:
            await ctx.step("boom", boom)
        except Exception:
            pass
        return list(parts)

    traced.run("POST /gather", "gather", 3, "the async workflow")
    wait_for(
        lambda: any(s.name == "kestrel.workflow gather" for s in exporter.get_finished_spans()), what="its run's span"
    )
    found = by_name([as_dict(s) for s in exporter.get_finished_spans()])
    (run,) = found["kestrel.workflow gather"]
    (request,) = found["POST /gather"]
    assert run["trace_id"] == request["trace_id"] and run["attributes"]["kestrel.outcome"] == "returned"
    steps = [s for name, group in found.items() if name.startswith("kestrel.step ") for s in group]
    assert sorted(s["name"] for s in steps) == ["kestrel.step boom", *(f"kestrel.step fetch-{i}" for i in range(3))]
    assert all(s["parent_id"] == run["span_id"] for s in steps)
    assert found["kestrel.step boom"][0]["status"] == "ERROR"


def test_a_child_workflow_continues_its_parents_trace(traced: Traced) -> None:
    app, exporter = traced.app, traced.exporter

    @app.workflow("child")
    def child(ctx: Any, n: int) -> int:
        return ctx.step("double", lambda: n * 2)

    @app.workflow("parent")
    def parent(ctx: Any, n: int) -> int:
        handle = ctx.start_child("child", n)
        return ctx.wait_for(handle)

    traced.run("POST /parent", "parent", 21, "the parent to succeed")
    wait_for(
        lambda: len([s for s in exporter.get_finished_spans() if s.name == "kestrel.workflow parent"]) == 2,
        what="the parent's two runs (before and after its child)",
    )
    found = by_name([as_dict(s) for s in exporter.get_finished_spans()])
    (request,) = found["POST /parent"]
    assert {s["trace_id"] for group in found.values() for s in group} == {request["trace_id"]}
    first = next(r for r in found["kestrel.workflow parent"] if r["attributes"]["kestrel.outcome"] == "parked")
    (start,) = found["kestrel.enqueue child"]
    assert start["parent_id"] == first["span_id"]  # started from the parent's run
    (child_run,) = found["kestrel.workflow child"]
    assert child_run["parent_id"] == start["span_id"]
    (double,) = found["kestrel.step double"]
    assert double["parent_id"] == child_run["span_id"]
