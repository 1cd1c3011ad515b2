"""A worker frozen past its lease, requeued by an operator, then resumed (issue 17).

One worker process (short lease) runs executions of three steps; it is SIGSTOPped mid-step,
left frozen until every lease has lapsed, the executions are requeued through the operator
API, and it is SIGCONTed. The worker claims them again (a newer claim under the same worker
id) while the frozen claim's threads still finish their steps: the stale claim's cleanup must
not drop the new claim from the heartbeat, or its own sweeper re-enqueues its live claim and
a step that started after the resume runs twice.

The suite runs ``$KESTREL_FROZEN_TRIES`` tries (default 2); the issue's 20:
``KESTREL_FROZEN_TRIES=20 python -m pytest tests/core/test_frozen_worker.py -n 0``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from kestrel_core import Kestrel
from tests.waiting import wait_for, wait_leases_lapsed
from tests.worker_processes import registered_worker

TRIES = int(os.environ.get("KESTREL_FROZEN_TRIES", "2"))
EXECUTIONS = 4  # per try, fewer than the worker's concurrency: it has free slots to reclaim
LEASE = 3


@pytest.fixture
def frozen_worker(dsn: str, ledger, tmp_path: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    log = tmp_path / "worker.log"
    with registered_worker(
        dsn, ledger, "tests.core.frozen_app:app", log, lease=LEASE, concurrency=2 * EXECUTIONS
    ) as proc:
        yield proc, log


def _started_in(db: psycopg.Connection, ids: list[int], step: str) -> bool:
    row = db.execute(
        "SELECT count(DISTINCT execution_id) FROM public.ledger WHERE step_id = %s AND execution_id = ANY(%s)",
        (step, ids),
    ).fetchone()
    return row[0] == len(ids)


def test_a_frozen_worker_requeued_then_resumed_runs_no_step_twice_after_the_resume(
    app: Kestrel, ledger: psycopg.Connection, frozen_worker
) -> None:
    proc, log = frozen_worker
    twice: list[tuple[int, int, str, int]] = []
    for attempt in range(TRIES):
        ids = [app.enqueue("three") for _ in range(EXECUTIONS)]
        wait_for(lambda: _started_in(ledger, ids, "s0"), timeout=30, what="every execution to start s0")
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            wait_leases_lapsed(ledger, ids)
            for eid in ids:
                app.requeue(eid, by="operator", comment="worker frozen")
            resumed_at = ledger.execute("SELECT clock_timestamp()").fetchone()[0]
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        wait_for(
            lambda: all(app.get(eid).done for eid in ids),
            timeout=60,
            what=f"try {attempt + 1}: every execution to finish",
        )
        assert [app.get(eid).status for eid in ids] == ["success"] * EXECUTIONS, log.read_text()[-3000:]
        twice += [
            (attempt + 1, *row)
            for row in ledger.execute(
                "SELECT execution_id, step_id, count(*) FROM public.ledger WHERE at > %s AND execution_id = ANY(%s)"
                " GROUP BY 1, 2 HAVING count(*) > 1 ORDER BY 1, 2",
                (resumed_at, ids),
            ).fetchall()
        ]
    text = log.read_text()
    assert twice == [], (
        f"steps started after the resume ran twice (try, execution, step, runs): {twice}; "
        f"leases_expired lines: {[l for l in text.splitlines() if 'leases_expired' in l][:5]}"
    )
    assert "event=write_refused" in text or "event=claim_lost" in text  # the frozen claims were fenced
