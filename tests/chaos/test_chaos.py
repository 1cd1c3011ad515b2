"""A short chaos run (about a minute) in the suite; the long one runs by hand:
``python -m tests.chaos --minutes 10``."""

from __future__ import annotations

import uuid

import pytest

from kestrel_console.embedded_pg import LocalCluster

from .harness import SHORT_RUN, run_checked

pytestmark = pytest.mark.slow


def test_nothing_lost_or_doubled_under_kills_stops_freezes_and_restarts(
    private_cluster: LocalCluster,
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = run_checked(
        private_cluster, SHORT_RUN, database=f"chaos_{uuid.uuid4().hex[:8]}", title="chaos", capsys=capsys
    )
    # The run did what it claims: every kind of disruption happened, on a real workload.
    assert report.kills >= 5 and report.stops == 2 and report.restarts == 2, report.summary()
    assert report.freezes == 2, report.summary()  # requeues: only what the frozen workers held running
    v = report.verdict
    assert report.enqueued >= 200 and v.statuses["success"] + v.cancelled + v.failed_as_meant == report.enqueued
    # cancels before first steps, deadlines, SystemExit and CancelledError steps, outside locks
    assert report.early_cancels >= 3 and v.failed_as_meant >= 6 and report.locks >= 3, report.summary()
    assert v.late_starts_checked >= report.enqueued, report.summary()  # every run's start was checked
    assert report.verdict.fan_outs >= report.enqueued // 8, report.summary()  # async fan-outs ran too
    assert report.verdict.ticks >= 20, report.summary()  # the schedule ticked through the chaos
    # the limited queue had work through the chaos, and its running count was read throughout
    assert report.verdict.limited >= report.enqueued // 3 - 1, report.summary()
    assert report.verdict.max_running >= 1 and report.verdict.limit_samples >= 1000, report.summary()
    # A step that ran again after a stop (a duplicate the stop explains) was cut off in its
    # stopped worker, whose write on waking must be refused. Not "was running something just
    # before its SIGSTOP", which it may have finished in between: that read failed a run.
    if report.verdict.duplicates_by_cause["stop"]:
        assert report.refused_writes >= 1, "a worker stopped mid-step woke up and wrote nothing refused"
