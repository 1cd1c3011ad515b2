"""A worker's settings (engine/settings.py) and its lifecycle (engine/worker_state.py): one value
checked once, and one state moved forward in one place."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from kestrel_core import InvalidArgument, Kestrel, WorkerSettings
from kestrel_core.engine import WorkerState
from kestrel_core.engine.worker_state import IllegalMove, Lifecycle


def test_the_derived_settings_are_those_the_worker_always_had() -> None:
    direct = WorkerSettings(lease=timedelta(seconds=10)).resolved(transaction_pooling=False, worker_id="gen")
    assert (direct.listen, direct.grace, direct.db_retry_window, direct.startup_timeout) == (
        True,
        timedelta(seconds=10),
        60.0,
        60.0,
    )
    assert direct.worker_id == "gen" and direct.transaction_pooling is False
    pooled = WorkerSettings(lease=timedelta(seconds=45), worker_id="w").resolved(
        transaction_pooling=True, worker_id="x"
    )
    assert (pooled.listen, pooled.db_retry_window, pooled.worker_id) == (False, 90.0, "w")
    given = WorkerSettings(listen=True, grace=timedelta(0), db_retry_window=5, startup_timeout=1.0)
    given = given.resolved(transaction_pooling=True, worker_id="x")
    assert (given.listen, given.grace, given.db_retry_window, given.startup_timeout) == (True, timedelta(0), 5, 1.0)


def test_queues_are_kept_sorted_without_repeats() -> None:
    assert WorkerSettings(queues=["b", "a", "b"]).queues == ("a", "b")
    assert WorkerSettings().queues is None


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("concurrency", 0),
        ("concurrency", True),
        ("concurrency", 2.0),
        ("lease", timedelta(milliseconds=999)),
        ("lease", 30),
        ("worker_id", ""),
        ("listen", "no"),
        ("poll_interval", 0),
        ("poll_interval", float("nan")),
        ("sweep_interval", -1.0),
        ("grace", timedelta(seconds=-1)),
        ("db_retry_window", -1),
        ("startup_timeout", "60"),
        ("prune_older_than", timedelta(0)),
        ("prune_every", 0),
        ("prune_max_batches", 0),
        ("queues", "emails"),
        ("queues", ["emails", ""]),
        ("transaction_pooling", 1),
    ],
)
def test_each_bad_value_is_one_invalid_argument_naming_the_option(option: str, value: object) -> None:
    with pytest.raises(InvalidArgument, match=option):
        WorkerSettings(**{option: value})  # type: ignore[arg-type]


def test_the_worker_takes_settings_keywords_or_both_and_checks_them_before_anything_starts() -> None:
    app = Kestrel("host=127.0.0.1 port=1 connect_timeout=1")  # never reached: nothing connects
    app.workflow("noop")(lambda ctx, x: x)
    with pytest.raises(InvalidArgument, match="concurrency"):
        app.worker(concurrency=0)
    with pytest.raises(ValueError, match="lease"):  # an InvalidArgument is a ValueError, as before
        app.worker(lease=timedelta(0))
    with pytest.raises(InvalidArgument, match="unknown worker option.*concurency"):
        app.worker(concurency=2)  # type: ignore[call-arg]
    worker = app.worker(WorkerSettings(concurrency=3, worker_id="a"), worker_id="b")
    assert (worker.concurrency, worker.worker_id, worker.listen) == (3, "b", True)
    assert worker.config.worker_id == "b" and worker.lifecycle.state is WorkerState.NEW
    pooled = app.worker(transaction_pooling=True)
    assert pooled.listen is False and pooled.settings.transaction_pooling is True
    assert app.transaction_pooling is False  # the app is not changed


def test_the_lifecycle_only_moves_forward() -> None:
    life = Lifecycle()
    assert life.move(WorkerState.STARTING) and life.move(WorkerState.RUNNING)
    assert not life.move(WorkerState.STARTING)  # already passed: nothing changes
    assert life.state is WorkerState.RUNNING
    assert life.move(WorkerState.HURRYING)  # a second signal while running: skips DRAINING
    assert life.reached(WorkerState.DRAINING) and not life.reached(WorkerState.PAST_GRACE)
    assert not life.advance(WorkerState.RUNNING, only_from=WorkerState.STARTING)


def test_a_worker_told_to_stop_while_new_never_runs() -> None:
    life = Lifecycle()
    with pytest.raises(IllegalMove, match="NEW to RUNNING"):
        life.move(WorkerState.RUNNING)
    assert life.move(WorkerState.DRAINING)
    assert not life.advance(WorkerState.RUNNING, only_from=WorkerState.STARTING)
    assert life.state is WorkerState.DRAINING


def test_waiting_for_a_state_ends_when_another_thread_reaches_it() -> None:
    life = Lifecycle()
    draining = life.flag(WorkerState.DRAINING)
    assert not draining.is_set() and not draining.wait(0.01)
    reached = threading.Event()
    waiter = threading.Thread(target=lambda: life.wait(WorkerState.QUIET, 10) and reached.set())
    waiter.start()
    life.move(WorkerState.DRAINING)
    assert draining.is_set() and not reached.is_set()
    life.move(WorkerState.QUIET)
    waiter.join(5)
    assert reached.is_set()
    draining.set()  # setting a state already passed changes nothing
    assert life.state is WorkerState.QUIET
