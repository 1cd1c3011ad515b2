""" "Why isn't it running?" for enqueued executions held back by their queue or version:
paused queue, concurrency limit, rate limit, per-key limit, no worker serving the queue,
missing version. Rows are set up directly; the Reader explains them."""

from __future__ import annotations

import psycopg
import pytest

from kestrel_console.read import Reader

LIVE_WORKER = """
INSERT INTO workers (worker_id, workflows, versions, concurrency, queues)
VALUES ('w1', '{job}', %s, 8, %s)
"""
QUEUE = """
INSERT INTO queues (name, concurrency, rate_limit, rate_period, per_key, keyed, paused, paused_by, paused_at)
VALUES ('q', %(concurrency)s, %(rate)s, %(period)s, 1, true, %(paused)s, %(by)s, CASE WHEN %(paused)s THEN now() END)
"""
EXECUTION = """
INSERT INTO workflow_executions (workflow_name, queue, status, concurrency_key, version, owner_id)
VALUES ('job', 'q', %s, %s, %s, %s) RETURNING id
"""


def add(db: psycopg.Connection, status: str = "enqueued", key: str | None = None, version: str | None = None) -> int:
    return db.execute(EXECUTION, (status, key, version, "w1" if status == "running" else None)).fetchone()[0]


def queue(db: psycopg.Connection, *, concurrency=None, rate=None, period=None, paused=False, by=None) -> None:
    db.execute(QUEUE, {"concurrency": concurrency, "rate": rate, "period": period, "paused": paused, "by": by})


def blocker(dsn: str, eid: int) -> str | None:
    with Reader(dsn) as reader:
        return reader.blocker(eid)


@pytest.fixture
def live(db: psycopg.Connection) -> psycopg.Connection:
    db.execute(LIVE_WORKER, (["v1"], None))
    return db


def test_paused_queue(dsn: str, live) -> None:
    queue(live, paused=True, by="alice")
    eid = add(live)
    assert blocker(dsn, eid).startswith("its queue 'q' is paused (by alice at ")
    assert blocker(dsn, eid).endswith("resume it (kestrel-console queue resume q)")


def test_concurrency_limit(dsn: str, live) -> None:
    queue(live, concurrency=2)
    add(live, "running"), add(live, "running")
    eid = add(live)
    assert blocker(dsn, eid) == (
        "queue 'q' is at its concurrency limit (2/2 running across all workers): it waits for one to finish"
    )


def test_rate_limit(dsn: str, live) -> None:
    queue(live, rate=2, period="1 minute")
    live.execute("UPDATE queues SET rate_starts = ARRAY[now() - interval '10 s', now() - interval '5 s']")
    eid = add(live)
    text = blocker(dsn, eid)
    assert text.startswith(
        "queue 'q' reached its rate limit (2 started in the last 1 m 00 s, limit 2): the next start is possible in "
    ), text


def test_per_key_limit(dsn: str, live) -> None:
    queue(live)
    add(live, "running", key="acme")
    eid = add(live, key="acme")
    other = add(live, key="globex")
    assert blocker(dsn, eid) == (
        "1 execution(s) with concurrency key 'acme' already run in queue 'q' "
        "(limit 1 per key): it waits for them to finish"
    )
    assert blocker(dsn, other) is None


def test_missing_version(dsn: str, live) -> None:
    queue(live)
    eid = add(live, version="v0")
    assert blocker(dsn, eid).startswith("it needs version v0 of 'job', live workers have v1: start a worker")


def test_queue_no_live_worker_serves(dsn: str, db: psycopg.Connection) -> None:
    db.execute(LIVE_WORKER, (["v1"], ["other"]))
    queue(db)
    eid = add(db)
    assert blocker(dsn, eid).startswith("no live worker serves queue 'q'")
