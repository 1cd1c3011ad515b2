"""The connection seam's one retry policy (db/retry.py): what each database error means, how
many times and after what pause it is tried again, and which refused batches are split. Every
retry loop asks it (Worker.db, the operator actions, the enqueue and boundary group commits);
their own tests (test_partitions*, test_group_commit, test_enqueue_batch, test_honest_retries,
test_cancel_cascade...) show they behave as before."""

from __future__ import annotations

from types import SimpleNamespace

import psycopg
import pytest

from kestrel_core import DatabaseUnavailable, SchemaOutdated
from kestrel_core.db.retry import RETRY, RetryPolicy, Verdict, past_the_ranges


class _PastTheRanges(psycopg.errors.CheckViolation):
    """What Postgres raises for an id no partition holds (its diag as the server fills it)."""

    diag = SimpleNamespace(table_name="workflow_executions", constraint_name=None)  # type: ignore[assignment]


class _ACheckOfOurs(psycopg.errors.CheckViolation):
    diag = SimpleNamespace(table_name="workflow_executions", constraint_name="priority_range")  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("error", "verdict"),
    [
        (psycopg.errors.DeadlockDetected("deadlock"), Verdict.CONFLICT),
        (psycopg.errors.SerializationFailure("could not serialize"), Verdict.CONFLICT),
        (psycopg.OperationalError("connection refused"), Verdict.OUTAGE),  # raised by the client
        (psycopg.errors.AdminShutdown("terminating connection"), Verdict.OUTAGE),
        (psycopg.errors.TooManyConnections("too many"), Verdict.OUTAGE),
        (_PastTheRanges("no partition"), Verdict.RANGES_BEHIND),
        (_ACheckOfOurs("violates check"), Verdict.REFUSED),
        (psycopg.errors.QueryCanceled("statement timeout"), Verdict.REFUSED),
        (psycopg.errors.UniqueViolation("duplicate key"), Verdict.REFUSED),
        (ValueError("not a database error"), Verdict.REFUSED),
    ],
)
def test_each_error_is_classified_once(error: BaseException, verdict: Verdict) -> None:
    assert RETRY.classify(error) is verdict
    assert past_the_ranges(error) is (verdict is Verdict.RANGES_BEHIND)


def _delays(policy: RetryPolicy, error: BaseException, **kwargs: object) -> list[float]:
    tries = policy.attempts(**kwargs)  # type: ignore[arg-type]
    delays = []
    while (again := tries.after(error)) is not None:
        delays.append(round(again.delay, 6))
        assert len(delays) < 100
    return delays


def test_a_conflict_is_tried_three_times_in_all_at_once() -> None:
    assert _delays(RETRY, psycopg.errors.DeadlockDetected("deadlock")) == [0.01, 0.02]


def test_ranges_behind_are_created_and_tried_five_times_in_all_with_a_growing_pause() -> None:
    assert _delays(RETRY, _PastTheRanges("no partition")) == [0.05, 0.1, 0.15, 0.2]


def test_an_outage_is_waited_out_for_the_window_only() -> None:
    lost = psycopg.OperationalError("server closed the connection")
    assert _delays(RETRY, lost) == []  # no window: raised at once (the claim, the prune)
    # Nobody sleeps here: each pause is checked against the window alone; the next (0.8) passes it.
    assert _delays(RETRY, lost, window=0.5) == [0.05, 0.1, 0.2, 0.4]


def test_a_refusal_is_never_retried_and_a_caller_retries_only_what_it_names() -> None:
    assert _delays(RETRY, psycopg.errors.QueryCanceled("statement timeout"), window=60) == []
    only_conflicts = frozenset({Verdict.CONFLICT})
    assert _delays(RETRY, psycopg.OperationalError("refused"), retry=only_conflicts, window=60) == []
    assert _delays(RETRY, psycopg.errors.DeadlockDetected("d"), retry=only_conflicts) == [0.01, 0.02]


def test_kinds_are_counted_apart_within_one_call() -> None:
    tries = RETRY.attempts(window=60)
    deadlock = psycopg.errors.DeadlockDetected("d")
    assert tries.after(deadlock) is not None and tries.after(deadlock) is not None
    again = tries.after(_PastTheRanges("no partition"))  # a conflict's tries do not use up these
    assert again is not None and again.verdict is Verdict.RANGES_BEHIND
    assert tries.after(deadlock) is None


@pytest.mark.parametrize(
    ("error", "split"),
    [
        (psycopg.OperationalError("connection lost"), False),  # says nothing about the rows
        (DatabaseUnavailable("down"), False),
        (SchemaOutdated("migrate"), False),
        (psycopg.errors.DataError("a NUL in text"), True),  # one row's: row by row
        (psycopg.errors.QueryCanceled("statement timeout"), True),
        (psycopg.errors.DeadlockDetected("outlived its retries"), True),
    ],
)
def test_a_refused_batch_is_split_unless_the_error_says_nothing_about_its_rows(error: Exception, split: bool) -> None:
    assert RETRY.splits(error) is split
