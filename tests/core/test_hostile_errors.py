"""Issue 43 (review a, b): no text a step or a workflow produces can strand its execution.

An exception whose ``str()`` (and ``repr()``) raises, and exception text holding a NUL
(Postgres refuses \\x00 in text, and \\u0000 in jsonb) or a lone surrogate (not UTF-8): before
the fix describing or writing them raised in the engine, the execution unwound and was replayed
every lease, forever. Each must end in the documented outcome: a step retried per its policy,
then StepFailed (the workflow ends as error); a workflow body that raises ends as error; an
output that cannot be stored is NotSerializable. The description of an unprintable exception
is a fallback such as ``<BadStr: str() raised ZeroDivisionError>``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from kestrel_core import Kestrel
from tests.waiting import wait_all_ended


class BadStr(Exception):
    """An exception whose text cannot be had: str() and repr() both raise."""

    def __str__(self) -> str:
        raise ZeroDivisionError("no text")

    def __repr__(self) -> str:
        raise ZeroDivisionError("no repr")


class BadStrBase(BaseException):
    """The same, a BaseException (logged as unusual before it is described)."""

    def __str__(self) -> str:
        raise ZeroDivisionError("no text")

    def __repr__(self) -> str:
        raise ZeroDivisionError("no repr")


class NotText(Exception):
    """``__str__`` returns no string: str() raises TypeError."""

    def __str__(self) -> Any:
        return 42


RAISED: dict[str, Any] = {
    "bad-str": BadStr,
    "bad-str-base": BadStrBase,
    "not-text": NotText,
    "nul": lambda: ValueError("before\x00after"),
    "surrogate": lambda: ValueError("lone \udc80 surrogate"),
}
# What the first line of the step's error (after "StepFailed: step 'boom' failed 2 times: ") or
# of the workflow's error starts with.
EXPECTED = {
    "bad-str": "<BadStr: str() raised ZeroDivisionError",
    "bad-str-base": "<BadStrBase: str() raised ZeroDivisionError",
    "not-text": "<NotText: str() raised TypeError",
    "nul": "ValueError: before\\x00after",
    "surrogate": "ValueError: lone \\udc80 surrogate",
}


def _raise(name: str) -> None:
    raise RAISED[name]()


async def _raise_async(name: str) -> None:
    raise RAISED[name]()


def _register(app: Kestrel, ledger: psycopg.Connection) -> None:
    def counted(eid: int, fn: Any, name: str) -> Any:
        ledger.execute("INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, 'boom')", (eid,))
        return fn(name)

    @app.workflow("step")
    def step(ctx, case):
        return ctx.step("boom", counted, ctx.execution_id, _raise, case["name"], retries=1, backoff=0.01)

    @app.workflow("step-async")
    async def step_async(ctx, case):
        async def boom() -> Any:
            counted(ctx.execution_id, lambda _n: None, case["name"])
            return await _raise_async(case["name"])

        return await ctx.step("boom", boom, retries=1, backoff=0.01)

    @app.workflow("body")
    def body(ctx, case):
        _raise(case["name"])

    @app.workflow("body-async")
    async def body_async(ctx, case):
        await _raise_async(case["name"])


def _ended(db: psycopg.Connection, ids: list[int]) -> None:
    wait_all_ended(db, ids, what=f"all {len(ids)} executions to end (none replayed forever)")


def test_unprintable_and_unstorable_exceptions_end_in_their_outcome(
    app: Kestrel, ledger: psycopg.Connection, start_worker
) -> None:
    _register(app, ledger)
    cases = {}
    for name in RAISED:
        for workflow in ("step", "step-async", "body", "body-async"):
            cases[app.enqueue(workflow, {"name": name})] = (workflow, name)
    worker = start_worker(app, lease=timedelta(seconds=1))
    _ended(ledger, list(cases))
    wrong = []
    for eid, (workflow, name) in cases.items():
        got = app.get(eid)
        first = (got.error or "").split("\n", 1)[0]
        want = EXPECTED[name]
        if workflow.startswith("step"):
            want = f"StepFailed: step 'boom' failed 2 times: {want}"
            runs = ledger.execute("SELECT count(*) FROM public.ledger WHERE execution_id = %s", (eid,)).fetchone()[0]
        else:
            runs = 2
        if got.status != "error" or not first.startswith(want) or runs != 2:
            wrong.append((workflow, name, got.status, first, runs))
    assert wrong == [], wrong
    assert worker.stats.get("lost", 0) == 0


def test_outputs_that_cannot_be_stored_fail_the_step_or_the_workflow(
    app: Kestrel, ledger: psycopg.Connection, start_worker
) -> None:
    values: list[Any] = ["a\x00b", {"k\x00": 1}, ["lone \udc80"]]

    @app.workflow("step-out")
    def step_out(ctx, i):
        return ctx.step("out", lambda: values[i])

    @app.workflow("body-out")
    def body_out(ctx, i):
        return values[i]

    @app.workflow("step-id")
    def step_id(ctx, _):
        return ctx.step("nul\x00id", lambda: 1)

    ids = [app.enqueue(w, i) for w in ("step-out", "body-out") for i in range(len(values))]
    ids.append(app.enqueue("step-id"))
    start_worker(app)
    _ended(ledger, ids)
    got = [(app.get(eid).status, (app.get(eid).error or "").split("\n", 1)[0]) for eid in ids]
    assert [status for status, _ in got] == ["error"] * len(ids), got
    assert all("not storable" in first for _, first in got[:-1]), got
    assert "step id" in got[-1][1] and "NUL" in got[-1][1], got[-1]
