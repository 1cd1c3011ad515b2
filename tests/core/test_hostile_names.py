"""NUL and lone surrogates in the other text a workflow or its caller supplies (issue 43 review).

Postgres text cannot hold a NUL, and a lone surrogate is not UTF-8: psycopg cannot send either.
Such a value in an event key, a child's workflow name, queue or concurrency key, or a step id
(of a step, a sleep, an approval gate, a child start, an event wait) must be a clear error in
the caller: in a workflow, a ValueError raised where it was given, ending the execution as
``error`` with the reason (once: not a write that fails, is retried and replays the execution
every lease, forever); in ``app.enqueue`` and ``app.send_event``, an InvalidArgument (a
ValueError) before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from kestrel_core import Kestrel
from tests.waiting import wait_for

NUL, LONE = "a\x00b", "a\udc80b"

# What each workflow does with a bad value (the execution's input picks the case).
CASES: dict[str, Callable[[Any, str], Any]] = {
    "event key": lambda ctx, bad: ctx.wait_for_event(bad, timeout=1),
    "event wait step id": lambda ctx, bad: ctx.wait_for_event("k", timeout=1, step_id=bad),
    "child workflow name": lambda ctx, bad: ctx.start_child(bad),
    "child queue": lambda ctx, bad: ctx.start_child("leaf", queue=bad),
    "child concurrency key": lambda ctx, bad: ctx.start_child("leaf", concurrency_key=bad),
    "child step id": lambda ctx, bad: ctx.start_child("leaf", step_id=bad),
    "step id": lambda ctx, bad: ctx.step(bad, lambda: 1),
    "sleep step id": lambda ctx, bad: ctx.sleep(bad, 0.01),
    "approval step id": lambda ctx, bad: ctx.wait_for_approval(bad, timeout=1),
}
ROWS = [(case, bad) for case in CASES for bad in (NUL, LONE)]


def test_bad_text_in_a_workflow_ends_it_once_with_the_reason(
    app: Kestrel, db: psycopg.Connection, start_worker: Callable[..., Any]
) -> None:
    @app.workflow("leaf")
    def leaf(ctx: Any, _input: Any) -> int:
        return 1

    @app.workflow("hostile")
    def hostile(ctx: Any, i: int) -> Any:
        case, bad = ROWS[i]
        ctx.step("before", lambda: 0)  # a step first: the bad value is met mid-run too
        return CASES[case](ctx, bad)

    ids = app.enqueue_many("hostile", list(range(len(ROWS))))
    start_worker(app, lease=timedelta(seconds=1), concurrency=6)
    wait_for(
        lambda: (
            db.execute(
                "SELECT count(*) FROM workflow_executions WHERE id = ANY(%s) AND status IN ('success', 'error')", (ids,)
            ).fetchone()[0]
            == len(ids)
        ),
        timeout=30,
        what="every execution to end (none replayed every lease)",
    )
    got = {
        row[0]: row[1:]
        for row in db.execute("SELECT id, status, claims, error FROM workflow_executions WHERE id = ANY(%s)", (ids,))
    }
    wrong = []
    for eid, (case, bad) in zip(ids, ROWS, strict=True):
        status, claims, error = got[eid]
        first = (error or "").split("\n", 1)[0]
        what = f"{case} with {'a NUL' if bad == NUL else 'a lone surrogate'}: {status}, {claims} claims, {first!r}"
        if not (
            status == "error"
            and claims == 1
            and first.startswith(("ValueError", "InvalidArgument"))
            and (("NUL" in first) if bad == NUL else ("surrogate" in first))
        ):
            wrong.append(what)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("bad", [NUL, LONE])
def test_bad_text_given_to_the_app_is_refused_before_anything_is_written(
    app: Kestrel, db: psycopg.Connection, bad: str
) -> None:
    @app.workflow("w")
    def w(ctx: Any, _input: Any) -> int:
        return 1

    calls: dict[str, Callable[[], Any]] = {
        "send_event key": lambda: app.send_event(bad, 1),
        "workflow name": lambda: app.enqueue(bad, 1),
        "idempotency key": lambda: app.enqueue("w", 1, idempotency_key=bad),
        "queue": lambda: app.enqueue("w", 1, queue=bad),
        "concurrency key": lambda: app.enqueue("w", 1, concurrency_key=bad),
        "enqueue_many queue": lambda: app.enqueue_many("w", [1], queue=bad),
    }
    for what, call in calls.items():
        with pytest.raises(ValueError) as raised:
            call()
        text = str(raised.value)
        assert not isinstance(raised.value, UnicodeError), f"{what}: psycopg's encoding error, not ours: {text!r}"
        assert ("NUL" in text) if bad == NUL else ("surrogate" in text), f"{what}: {text!r}"
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM workflow_events").fetchone()[0] == 0
