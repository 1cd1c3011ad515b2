"""The headless timeline model (issue 11, cleaner house): lanes, segments and one axis that the
CLI's table and the TUI's trace both draw, computed from the Reader's timeline rows."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

from kestrel_console.timeline_model import (
    Segment,
    axis_span,
    bar_cols,
    build_lanes,
    decider,
    family_line,
    segment,
    trace,
)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def step(step_id: str, attempt: int, start: float, end: float | None, outcome: str, error: str | None = None) -> dict:
    return {
        "kind": "step",
        "step_id": step_id,
        "attempt": attempt,
        "started_at": at(start),
        "finished_at": None if end is None else at(end),
        "outcome": outcome,
        "error": error,
    }


def wait(kind: str, step_id: str, start: float, end: float | None, outcome: str, **more) -> dict:
    return {
        "kind": kind,
        "step_id": step_id,
        "attempt": None,
        "started_at": at(start),
        "finished_at": None if end is None else at(end),
        "outcome": outcome,
        **more,
    }


def execution(end: float | None = None, **more) -> dict:
    return {
        "id": 7,
        "status": "success" if end is not None else "running",
        "created_at": T0,
        "started_at": T0,
        "finished_at": None if end is None else at(end),
        **more,
    }


RETRIED = [
    step("rca", 1, 0, 10, "success"),
    step("fix", 1, 10, 20, "error", "boom"),
    step("fix", 2, 30, 40, "success"),
    wait("approval", "approve-fix", 40, 100, "approved", decided_by="alice"),
    wait("sleep", "cool-down", 100, 110, "woke", wake_at=at(110)),
]


def test_a_step_is_one_lane_of_its_attempts_and_each_wait_its_own_lane():
    lanes = build_lanes(RETRIED)
    assert [(lane.step_id, lane.kind) for lane in lanes] == [
        ("rca", "step"),
        ("fix", "step"),
        ("approve-fix", "approval"),
        ("cool-down", "sleep"),
    ]
    fix = lanes[1]
    assert (fix.attempts, fix.failed, fix.took(at(999))) == (2, 1, 30.0)
    assert [s.attempt for s in fix.segments] == [1, 2] and fix.segments[0].error == "boom"
    assert lanes[2].entry is RETRIED[3] and lanes[2].attempts == 0  # a wait keeps its row
    assert build_lanes([]) == []


def test_the_axis_runs_from_the_start_to_the_end_or_now_or_a_pending_sleeps_due_time():
    assert axis_span(execution(end=120), RETRIED, now=at(500)) == (T0, at(120))
    running = [step("rca", 1, 0, None, "running")]
    assert axis_span(execution(), running, now=at(50)) == (T0, at(50))
    sleeping = [step("rca", 1, 0, 5, "success"), wait("sleep", "nap", 5, None, "waiting", wake_at=at(90))]
    assert axis_span(execution(), sleeping, now=at(30)) == (T0, at(90))
    # An entry that started before the execution's start moves the axis start back; a
    # zero-length execution still has an axis.
    assert axis_span(execution(end=0), [step("a", 1, -2, 0, "success")], now=at(9)) == (at(-2), T0)
    assert axis_span(execution(end=0), [], now=at(9)) == (T0, T0 + timedelta(milliseconds=1))


def test_bars_are_scaled_to_the_axis_and_never_vanish():
    assert bar_cols(at(0), at(50), T0, at(100), 40) == (0, 20)
    assert bar_cols(at(50), at(100), T0, at(100), 40) == (20, 40)
    assert bar_cols(at(10), at(10.001), T0, at(100), 40) == (4, 5)  # 1 ms still gets a column
    assert bar_cols(at(100), at(100), T0, at(100), 40) == (39, 40)  # at the very end: clamped in
    assert bar_cols(at(-5), at(200), T0, at(100), 40) == (0, 40)


def test_a_bar_ends_at_its_end_else_a_pending_sleeps_due_time_else_now():
    now = at(60)
    assert segment(RETRIED[0]).bar_end(now) == at(10)
    assert segment(step("x", 1, 0, None, "running")).bar_end(now) == now
    pending = segment(wait("sleep", "nap", 5, None, "waiting", wake_at=at(90)))
    assert pending == Segment(at(5), None, "waiting", due=at(90)) and pending.bar_end(now) == at(90)
    # A woken sleep and a pending approval have no due time on the axis.
    assert segment(RETRIED[4]).due is None
    assert segment(wait("approval", "gate", 5, None, "waiting")).bar_end(now) == now


def test_the_trace_holds_lanes_axis_attempt_counts_and_offsets():
    model = trace(execution(end=120), RETRIED, now=at(500))
    assert (model.t0, model.t1, model.span_s, model.elapsed_s) == (T0, at(120), 120.0, 120.0)
    assert [lane.step_id for lane in model.lanes] == ["rca", "fix", "approve-fix", "cool-down"]
    assert model.attempts_of("fix") == 2 and model.attempts_of("rca") == 1 and model.attempts_of("nope") == 0
    assert model.offset_s(RETRIED[2]) == 30.0
    assert model.cols(segment(RETRIED[3]), 12) == (4, 10)  # the approval: 40 s to 100 s of 120 s
    assert trace(execution(), [], now=at(5)).lanes == []


def test_who_decided_and_the_family_line_are_plain_escaped_text():
    assert decider({"decided_by": "alice"}) == "alice"
    assert decider({"decided_by": "eve\x1b[31m", "decided_by_db_user": "ops"}) == "eve\\x1b[31m (db role ops)"
    assert family_line({"parent_id": 3, "children": [{"id": 8, "status": "success"}]}) == (
        "parent #3 · children (1): #8 success"
    )
    many = family_line({"children": [{"id": i, "status": "running"} for i in range(25)]}, limit=2)
    assert many == "children (25): #0 running, #1 running, … 23 more"
    assert family_line({}) == ""


def test_the_model_imports_neither_rich_nor_textual():
    code = (
        "import sys, kestrel_console.timeline_model; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'textual'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
