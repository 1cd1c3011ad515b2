"""``EnqueueOptions``: the six enqueue options as one value, checked once when built; the
clients and ``ctx.start_child`` take it as ``options=`` or the same keywords, not both."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from kestrel_core import (
    AsyncKestrel,
    AsyncWorkflowContext,
    ChildKeywords,
    EnqueueKeywords,
    EnqueueOptions,
    InvalidArgument,
    Kestrel,
    WorkflowContext,
)
from kestrel_core.dispatch.enqueue import rows
from kestrel_core.workflow.flow_context import child_options


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"priority": 2**31}, r"^priority must be an integer from -2147483648 to 2147483647, not 2147483648$"),
        ({"priority": -(2**31) - 1}, r"^priority must be an integer from .* not -2147483649$"),
        ({"priority": 1.5}, r"^priority must be an integer from .* not 1\.5$"),
        ({"priority": True}, r"^priority must be an integer from .* not True$"),
        ({"delay": 30}, r"^delay must be a datetime\.timedelta, not int \(30\): e\.g\. delay=timedelta\(seconds=30\)$"),
        ({"delay": timedelta(days=3651)}, r"^delay too long \(3\.15446e\+08 s; the limit is 3650 days = .* s\)$"),
        ({"delay": timedelta(days=-3651)}, r"^delay too far in the past \(-3\.15446e\+08 s; at most 3650 days back\)$"),
        ({"run_at": "2030-01-01"}, r"^run_at must be a datetime\.datetime, not str \('2030-01-01'\)$"),
        ({"run_at": datetime.now(UTC), "delay": timedelta(1)}, r"^give run_at or delay, not both$"),
        ({"idempotency_key": ""}, r"^an idempotency key must be a non-empty string, not ''$"),
        ({"idempotency_key": "child:1:x"}, r"^idempotency key 'child:1:x' starts with 'child:', a prefix reserved"),
        ({"idempotency_key": "k" * 501}, r"^an idempotency key is too long \(501 characters; the limit is 500\)$"),
        ({"queue": ""}, r"^a queue name must be a non-empty string, not ''$"),
        ({"queue": "q\x00"}, r"^a queue name cannot contain a NUL character$"),
        ({"concurrency_key": 7}, r"^a concurrency key must be a non-empty string, not 7$"),
        ({"concurrency_key": "\ud800"}, r"^a concurrency key is not valid Unicode text \(it holds a lone surrogate\)$"),
    ],
)
def test_each_bad_value_is_one_clear_invalid_argument(given: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        EnqueueOptions(**given)  # type: ignore[arg-type]


def test_good_values_are_kept_and_the_value_is_frozen() -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    options = EnqueueOptions(idempotency_key="k", run_at=at, priority=-5, queue="q", concurrency_key="c")
    assert (options.idempotency_key, options.run_at, options.priority, options.queue, options.concurrency_key) == (
        "k",
        at,
        -5,
        "q",
        "c",
    )
    assert options.start_at() == at
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.priority = 1  # type: ignore[misc]


def test_a_delay_counts_from_each_use() -> None:
    options = EnqueueOptions(delay=timedelta(minutes=5))
    before = datetime.now(UTC)
    (row,) = rows({}, "w", [None], options, single=True)
    assert row.run_at is not None and before + timedelta(minutes=5) <= row.run_at
    assert row.run_at <= datetime.now(UTC) + timedelta(minutes=5)


def test_options_or_keywords_not_both() -> None:
    assert EnqueueOptions.of(None, priority=3) == EnqueueOptions(priority=3)
    chosen = EnqueueOptions(queue="q")
    assert EnqueueOptions.of(chosen, priority=None, queue=None) is chosen
    with pytest.raises(InvalidArgument, match=r"^give options= or priority, queue, not both$"):
        EnqueueOptions.of(chosen, priority=3, queue="q")
    with pytest.raises(InvalidArgument, match=r"^options must be an EnqueueOptions, not dict \(\{'priority': 3\}\)$"):
        EnqueueOptions.of({"priority": 3})


def test_the_clients_take_the_value(app: Kestrel, db: psycopg.Connection) -> None:
    options = EnqueueOptions(idempotency_key="once", priority=7, queue="q", concurrency_key="c")
    first = app.enqueue("w", {"n": 1}, options=options)
    assert app.enqueue("w", {"n": 2}, options=options) == first
    row = db.execute(
        "SELECT idempotency_key, priority, queue, concurrency_key FROM workflow_executions WHERE id = %s", (first,)
    ).fetchone()
    assert row == ("once", 7, "q", "c")
    many = app.enqueue_many("w", [1, 2], options=EnqueueOptions(priority=2, queue="q"))
    assert db.execute(
        "SELECT array_agg(priority ORDER BY id) FROM workflow_executions WHERE id = ANY(%s)", (many,)
    ).fetchone() == ([2, 2],)
    with pytest.raises(InvalidArgument, match="give options= or priority, not both"):
        app.enqueue("w", None, options=options, priority=1)
    with pytest.raises(InvalidArgument, match="enqueue_many takes no idempotency_key"):
        app.enqueue_many("w", [1], options=options)
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (3,)


def test_a_child_takes_the_options_but_no_idempotency_key() -> None:
    assert child_options(None, priority=1, delay=None, run_at=None, queue="q", concurrency_key=None) == (
        EnqueueOptions(priority=1, queue="q")
    )
    with pytest.raises(InvalidArgument, match=r"^a child workflow takes no idempotency_key"):
        child_options(EnqueueOptions(idempotency_key="k"))


def test_the_keyword_options_are_the_value_s_fields_named_once() -> None:
    """Every call that takes the options as keywords types them with one TypedDict (so a type
    checker sees a misspelt or mistyped one in the caller's code), whose keys are the fields."""
    fields = {f.name for f in dataclasses.fields(EnqueueOptions)}
    assert set(typing.get_type_hints(EnqueueKeywords)) == fields
    assert set(typing.get_type_hints(ChildKeywords)) == fields - {"idempotency_key"}
    takes = {
        Kestrel.enqueue: "EnqueueKeywords",
        AsyncKestrel.enqueue: "EnqueueKeywords",
        Kestrel.enqueue_many: "ChildKeywords",
        AsyncKestrel.enqueue_many: "ChildKeywords",
        WorkflowContext.start_child: "ChildKeywords",
        AsyncWorkflowContext.start_child: "ChildKeywords",
    }
    for method, keywords in takes.items():
        (given,) = (p for p in inspect.signature(method).parameters.values() if p.kind is p.VAR_KEYWORD)
        assert f"Unpack[{keywords}]" in str(given.annotation).replace("_enqueue.", ""), method


def test_a_misspelt_option_is_a_type_error_and_writes_nothing(app: Kestrel, db: psycopg.Connection) -> None:
    every = "concurrency_key, delay, idempotency_key, priority, queue, run_at"
    but_the_key = "concurrency_key, delay, priority, queue, run_at"
    with pytest.raises(TypeError, match=rf"^unexpected keyword argument 'priorty': the options are {every} \("):
        app.enqueue("w", None, priorty=1)  # type: ignore[call-arg]
    for misspelt in (
        lambda: app.enqueue_many("w", [1], options=EnqueueOptions(priority=2), priorty=1),  # type: ignore[call-arg]
        lambda: child_options(None, priorty=1),
    ):
        with pytest.raises(TypeError, match=rf"the options are {but_the_key} \("):
            misspelt()
    # as at the call when the keyword was no parameter, None too: it is no option of theirs
    with pytest.raises(TypeError, match="^unexpected keyword argument 'idempotency_key'"):
        app.enqueue_many("w", [1], idempotency_key=None)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="^unexpected keyword argument 'idempotency_key'"):
        child_options(None, idempotency_key=None)
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone() == (0,)
