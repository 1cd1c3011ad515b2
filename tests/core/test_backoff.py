"""One backoff policy and one masked first line for every retry loop and log line (issue 11)."""

from __future__ import annotations

import pytest

from kestrel_core import first_line
from kestrel_core.base.backoff import Backoff

SECRET = "Sx9zq"


def test_backoff_doubles_from_initial_up_to_the_cap() -> None:
    policy = Backoff(0.1, cap=2.0)
    assert [round(policy.delay(n), 3) for n in range(7)] == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    assert policy.delay(10_000) == 2.0  # a long outage neither overflows nor grows past the cap


def test_backoff_jitter_only_shrinks_the_delay_within_its_fraction() -> None:
    policy = Backoff(1.0, cap=60.0, jitter=0.5)
    delays = [policy.delay(3) for _ in range(200)]
    assert all(4.0 <= d <= 8.0 for d in delays)
    assert len(set(delays)) > 1


@pytest.mark.parametrize(
    "exc, line",
    [
        (
            RuntimeError(f"connection to postgresql://bob:{SECRET}@db/app failed\nDETAIL: more"),
            "connection to postgresql://bob:****@db/app failed",
        ),
        (RuntimeError(f"  bad host=db password={SECRET} user=bob  \n"), "bad host=db password=**** user=bob"),
        (TimeoutError(), "TimeoutError"),
        (RuntimeError("   "), "RuntimeError"),
    ],
)
def test_first_line_is_one_masked_line(exc: BaseException, line: str) -> None:
    assert first_line(exc) == line


def test_first_line_hides_a_bare_password_of_the_dsn_in_use() -> None:
    exc = RuntimeError(f'invalid percent-encoded token: "{SECRET}"')
    assert SECRET not in first_line(exc, f"postgresql://bob:{SECRET}@db/app")
