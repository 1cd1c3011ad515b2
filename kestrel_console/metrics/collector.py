"""The Prometheus collector: each scrape reads one snapshot (``read.operations``) and turns it
into metric families; the saved reports that declare a metric add their gauges
(``report_gauges``).

Gauges are what the tables hold now. The two families that count what finished (the counter
``kestrel_executions_finished_total`` and the histogram ``kestrel_step_duration_seconds``)
are kept by this process: each scrape adds what finished between the previous scrape's mark and
now less a settle time (``SETTLE_S``), read through the finished-time indexes, so they start at
0 when the endpoint starts, as Prometheus counters do, and never go down. ``execution_counts``
is not a counter: a prune or a requeue lowers it (it is exported as the gauge
``kestrel_history_executions``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..read.operations import OperationsReader
from ..safe_text import visible
from .defaults import SETTLE_S

# A scrape counts at most this many seconds of finishes (no scrape for longer: the older ones
# are not counted), which bounds its read.
WINDOW_S = 600.0
# Step durations, in seconds: from a few milliseconds (a step that returns at once) to hours.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 7200.0)
# Step ids are chosen by code and may be generated (``f"item-{n}"``): past this many distinct
# steps in one workflow, the others are counted under step="(other)", so that the series stay
# few.
MAX_STEPS_PER_WORKFLOW = 100
OTHER_STEP = "(other)"

PREFIX = "kestrel_"


def _label(value: Any) -> str:
    return "" if value is None else visible(str(value))


class KestrelCollector(Collector):
    """Collects Kestrel's metrics from the database at each scrape (one at a time)."""

    def __init__(
        self,
        reader: OperationsReader,
        *,
        reports: Callable[[], Iterable[Metric]] | None = None,
        settle_s: float = SETTLE_S,
        window_s: float = WINDOW_S,
        bounds: tuple[float, ...] = DURATION_BUCKETS,
        max_steps: int = MAX_STEPS_PER_WORKFLOW,
    ) -> None:
        self.reader = reader
        self.reports = reports
        self.settle_s = settle_s
        self.window_s = window_s
        self.bounds = bounds
        self.max_steps = max_steps
        self._lock = threading.Lock()
        self._since: datetime | None = None
        self._finished: dict[tuple[str, str], int] = {}
        # (workflow, step, outcome) -> [count per width_bucket 0..len(bounds), sum of seconds]
        self._durations: dict[tuple[str, str, str], list[float]] = {}
        self._steps: dict[str, set[str]] = {}
        self.last_error: str | None = None

    def describe(self) -> list[Metric]:
        return []  # the families depend on the data: no check of names at registration

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            yield from self._collect()

    # -- one scrape ------------------------------------------------------------------------

    def _collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        try:
            ops = self.reader.operations(
                since=self._since, settle_s=self.settle_s, window_s=self.window_s, bounds=self.bounds
            )
        except Exception as exc:  # the endpoint stays up and says so: kestrel_up 0
            self.last_error = visible(str(exc).strip())
            ops = None
        elapsed = time.perf_counter() - started
        yield _gauge("up", "1 if this scrape read the database, else 0 (see the endpoint's log)", value=ops is not None)
        yield _gauge("scrape_duration_seconds", "Seconds this scrape's database read took", value=elapsed)
        if ops is not None:
            self.last_error = None
            if self._since is not None:
                self._add_finished(ops.get("finished_since", []))
                self._add_durations(ops.get("attempts_since", []))
            self._since = ops["until"]["until"]
            yield from _snapshot_families(ops)
        yield from self._counted_families()
        if self.reports is not None:
            yield from self.reports()

    def _add_finished(self, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            key = (_label(r["workflow_name"]), _label(r["status"]))
            self._finished[key] = self._finished.get(key, 0) + int(r["n"])

    def _add_durations(self, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            workflow = _label(r["workflow_name"])
            steps = self._steps.setdefault(workflow, set())
            step = _label(r["step_id"])
            if step not in steps:
                if len(steps) >= self.max_steps:
                    step = OTHER_STEP
                else:
                    steps.add(step)
            cell = self._durations.setdefault((workflow, step, _label(r["outcome"])), [0.0] * (len(self.bounds) + 2))
            cell[int(r["bucket"])] += int(r["n"])
            cell[-1] += float(r["seconds"] or 0.0)

    def _counted_families(self) -> Iterator[Metric]:
        finished = CounterMetricFamily(
            PREFIX + "executions_finished",
            "Executions that finished (success, error, cancelled) since this endpoint started, "
            "counted once settled (a requeued one that finishes again counts again)",
            labels=["workflow", "status"],
        )
        for (workflow, status), n in sorted(self._finished.items()):
            finished.add_metric([workflow, status], n)
        yield finished
        durations = HistogramMetricFamily(
            PREFIX + "step_duration_seconds",
            "Duration of step attempts that ended since this endpoint started, by outcome",
            labels=["workflow", "step", "outcome"],
        )
        for (workflow, step, outcome), cell in sorted(self._durations.items()):
            cumulative, buckets = 0.0, []
            for i, bound in enumerate(self.bounds):
                cumulative += cell[i]  # width_bucket 0 (below the first bound) .. i: under bound i
                buckets.append((_le(bound), cumulative))
            cumulative += cell[len(self.bounds)]
            buckets.append(("+Inf", cumulative))
            durations.add_metric([workflow, step, outcome], buckets, sum_value=cell[-1])
        yield durations


def _le(bound: float) -> str:
    return repr(float(bound)) if not math.isinf(bound) else "+Inf"


def _gauge(name: str, doc: str, labels: list[str] | None = None, value: float | None = None) -> GaugeMetricFamily:
    if labels is None:
        return GaugeMetricFamily(PREFIX + name, doc, value=float(value or 0))
    return GaugeMetricFamily(PREFIX + name, doc, labels=labels)


def _by_queue_and_workflow(
    rows: Iterable[Mapping[str, Any]], columns: Sequence[tuple[str, str, str, Callable[[Any], float]]]
) -> list[GaugeMetricFamily]:
    """One gauge per (name, help, column, number type) of ``columns``, a sample per row of
    ``rows``, labelled by the row's queue and workflow."""
    gauges = [(_gauge(name, doc, ["queue", "workflow"]), column, number) for name, doc, column, number in columns]
    for r in rows:
        labels = [_label(r["queue"]), _label(r["workflow_name"])]
        for gauge, column, number in gauges:
            gauge.add_metric(labels, number(r[column]))
    return [gauge for gauge, _, _ in gauges]


def _snapshot_families(ops: dict[str, Any]) -> Iterator[Metric]:
    """The gauges of one snapshot."""
    yield from _by_queue_and_workflow(
        ops["ready"],
        [
            ("queue_depth", "Enqueued executions (due now or delayed), by queue and workflow", "enqueued", int),
            ("queue_due", "Enqueued executions due now (run_at passed), by queue and workflow", "due", int),
            (
                "queue_oldest_due_age_seconds",
                "Seconds the oldest due enqueued execution has waited since it became due (0: none due)",
                "oldest_due_age_s",
                float,
            ),
        ],
    )
    yield from _by_queue_and_workflow(
        ops["running"],
        [
            ("running", "Running executions, by queue and workflow", "running", int),
            (
                "stuck_leases",
                "Running executions whose lease expired (owner dead or hung), by queue and workflow",
                "stuck",
                int,
            ),
        ],
    )

    waiting = _gauge(
        "waiting", "Executions parked in a sleep, approval, child or event wait, by workflow", ["workflow"]
    )
    for r in ops["waiting"]:
        waiting.add_metric([_label(r["workflow_name"])], int(r["waiting"]))
    yield waiting

    paused = _gauge(
        "paused", "Executions an operator paused (nothing runs them until resumed), by workflow", ["workflow"]
    )
    for r in ops["paused"]:
        paused.add_metric([_label(r["workflow_name"])], int(r["paused"]))
    yield paused

    history = _gauge(
        "history_executions",
        "Finished executions the history holds now, by workflow and status (execution_counts: "
        "prune and requeue lower it; rates come from kestrel_executions_finished_total)",
        ["workflow", "status"],
    )
    for r in ops["finished"]:
        history.add_metric([_label(r["workflow_name"]), _label(r["status"])], int(r["count"]))
    yield history

    approvals = _gauge("pending_approvals", "Approval gates waiting for a decision, by workflow", ["workflow"])
    approval_age = _gauge(
        "pending_approval_oldest_age_seconds",
        "Seconds the oldest pending approval gate has waited, by workflow",
        ["workflow"],
    )
    for r in ops["approvals"]:
        approvals.add_metric([_label(r["workflow_name"])], int(r["pending"]))
        approval_age.add_metric([_label(r["workflow_name"])], float(r["oldest_age_s"]))
    yield from (approvals, approval_age)

    yield from _queue_families(ops["queues"])
    yield from _worker_families(ops["workers"])
    yield from replica_families(ops.get("replica"))


def replica_families(replica: Any) -> Iterator[Metric]:
    """Only when the endpoint reads a streaming replica (--read-dsn): how far behind it is."""
    if replica is None or not replica.replica:
        return
    yield _gauge(
        "replica_lag_seconds",
        "Seconds the replica this endpoint reads is behind its primary (0: it replayed all it "
        "received; NaN: unknown, nothing replayed yet); every other gauge is that old",
        value=math.nan if replica.lag_s is None else replica.lag_s,
    )
    yield _gauge(
        "replica_streaming",
        "1 if the replica this endpoint reads receives WAL from its primary",
        value=replica.streaming,
    )


def _queue_families(queues: list[dict[str, Any]]) -> Iterator[Metric]:
    paused = _gauge("queue_paused", "1 if the queue is paused by an operator", ["queue"])
    running = _gauge("queue_running", "Running executions of the queue (against its limits)", ["queue"])
    concurrency = _gauge("queue_concurrency_limit", "The queue's concurrency limit, across all workers", ["queue"])
    per_worker = _gauge("queue_per_worker_limit", "The queue's limit per worker", ["queue"])
    rate = _gauge("queue_rate_limit", "Starts the queue allows per rate period", ["queue"])
    period = _gauge("queue_rate_period_seconds", "The queue's rate period", ["queue"])
    used = _gauge("queue_rate_used", "Starts in the queue's current rate window", ["queue"])
    serving = _gauge("queue_live_workers", "Live workers that can run something of the queue", ["queue"])
    for q in queues:
        name = [_label(q["name"])]
        paused.add_metric(name, 1 if q["paused"] else 0)
        running.add_metric(name, int(q["running"]))
        serving.add_metric(name, int(q["live_workers"]))
        if q["concurrency"] is not None:
            concurrency.add_metric(name, int(q["concurrency"]))
        if q["per_worker"] is not None:
            per_worker.add_metric(name, int(q["per_worker"]))
        if q["rate_limit"] is not None:
            rate.add_metric(name, int(q["rate_limit"]))
            period.add_metric(name, float(q["rate_period_s"]))
            used.add_metric(name, int(q["rate_used"] or 0))
    yield from (paused, running, concurrency, per_worker, rate, period, used, serving)


WORKER_STATES = ("alive", "late", "silent", "stopped")


def _worker_families(workers: list[dict[str, Any]]) -> Iterator[Metric]:
    states = _gauge(
        "workers",
        "Workers seen in the last hour or holding executions, by state (alive; late: its heartbeat "
        "is overdue; silent: none within the dead-after time; stopped)",
        ["state"],
    )
    counts = dict.fromkeys(WORKER_STATES, 0)
    for w in workers:
        counts[w["state"]] = counts.get(w["state"], 0) + 1
    for state, n in counts.items():
        states.add_metric([state], n)
    yield states
    age = _gauge(
        "worker_heartbeat_age_seconds", "Seconds since each live worker's last heartbeat", ["worker", "hostname"]
    )
    held = _gauge("worker_held", "Executions each live worker holds", ["worker", "hostname"])
    slots = _gauge("worker_slots", "Each live worker's concurrency", ["worker", "hostname"])
    per_workflow: dict[str, int] = {}
    for w in workers:
        if not w["alive"]:
            continue
        labels = [_label(w["worker_id"]), _label(w["hostname"])]
        age.add_metric(labels, float(w["heartbeat_age_s"] or 0.0))
        held.add_metric(labels, int(w["held"]))
        if w["concurrency"] is not None:
            slots.add_metric(labels, int(w["concurrency"]))
        for name in w["workflows"] or []:
            per_workflow[name] = per_workflow.get(name, 0) + 1
    yield from (age, held, slots)
    live = _gauge("workflow_live_workers", "Live workers that registered each workflow", ["workflow"])
    for name, n in sorted(per_workflow.items()):
        live.add_metric([_label(name)], n)
    yield live
