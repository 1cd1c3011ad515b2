"""A claim whose later statement fails keeps what its first took (issue 43 review).

``claim_batch`` runs several statements: the look behind the mark, the walk past it, the check
for limited queues with work, the limited claim. Each that takes rows commits them (running,
leased to this worker). A later one failing (a statement or lock timeout, a lost connection,
a bug) raised out of the batch, and the rows already taken were in no thread's hands: running,
unheartbeated, until the lease lapsed and a sweep gave them back. Now the batch returns them
and the worker runs them at once. The failure is injected (the statement replaced by one the
server refuses, or the limited claim raising), with a 30 s lease: the executions must finish
well within it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from kestrel_core import Kestrel
from kestrel_core.db.sql_files import Statements
from kestrel_core.dispatch import claim as claim_mod
from kestrel_core.dispatch import limited_claim
from kestrel_core.engine.worker import Worker
from tests.waiting import wait_for

LEASE = timedelta(seconds=30)


@pytest.mark.parametrize("failing", ["limited_check", "limited_claim"])
def test_rows_a_claim_took_run_when_a_later_statement_fails(
    app: Kestrel,
    db: psycopg.Connection,
    start_worker: Callable[..., Worker],
    monkeypatch: pytest.MonkeyPatch,
    failing: str,
) -> None:
    @app.workflow("w")
    def w(ctx: Any, n: int) -> int:
        return n

    app.queue("lim", concurrency=2)

    @app.workflow("lw", queue="lim")
    def lw(ctx: Any, n: int) -> int:
        return n

    failures: list[str] = []
    if failing == "limited_check":
        # The server refuses it (division by zero), after the fast claim committed its rows.
        failing_check = {"limited_with_work": "SELECT 1 / 0 WHERE %(names)s::text[] IS NOT NULL"}
        blocks = {name: limited_claim.SQL[name] for name in limited_claim.SQL} | failing_check
        monkeypatch.setattr(limited_claim, "SQL", Statements(blocks, "test"))
    else:

        def claim_limited(*args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
            failures.append("limited")
            raise psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")

        monkeypatch.setattr(claim_mod, "claim_limited", claim_limited)
    ids = app.enqueue_many("w", [1, 2, 3])
    if failing == "limited_claim":
        app.enqueue("lw", 4)  # limited work, so that the limited claim runs after the fast one
    start_worker(app, lease=LEASE, concurrency=8)
    wait_for(
        lambda: (
            db.execute(
                "SELECT count(*) FROM workflow_executions WHERE id = ANY(%s) AND status = 'success'", (ids,)
            ).fetchone()[0]
            == len(ids)
        ),
        timeout=10,  # a third of the lease: the rows taken are not left to lapse
        what="the executions the fast claim took to run",
    )
    if failing == "limited_claim":
        assert failures, "the limited claim ran (and failed)"
