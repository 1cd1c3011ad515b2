"""The app of tests/core/test_claim_freeze.py, run in a worker subprocess ($KESTREL_DSN).

With $KESTREL_FREEZE_AFTER_CLAIM=1 the process stops itself (SIGSTOP) right after its first
claim statement that took rows, as a GC pause or an operator's SIGSTOP could: before that
claim's COMMIT when the claim is a transaction the client commits, after it when the claim
commits on the server. The claim statements are told by what they take (``USING picked``: the
fast path, ``USING locked``: the limited claim). Their rows are read, then the cursor is
rewound for the engine to read them.

With $KESTREL_PAUSE_IN_CLAIM_S=<s> the claiming thread instead pauses that long (once) right
after a claim statement that took rows inside a transaction (before its COMMIT), then asks in
that transaction whether any lease it just stamped has already lapsed, and records the answer
in public.ledger (step_id 'lapsed', execution_id = how many), or 'ended' when the server ended
the transaction meanwhile.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import psycopg

from kestrel_core import Kestrel

app = Kestrel(transaction_pooling=os.environ.get("KESTREL_TEST_POOLING") == "1")
app.queue("limited", concurrency=8)
_frozen = threading.Event()
_execute = psycopg.Connection.execute


def _execute_then_freeze(self: psycopg.Connection, query: Any, params: Any = None, **kwargs: Any) -> Any:
    cur = _execute(self, query, params, **kwargs)
    text = query.as_string(None) if hasattr(query, "as_string") else str(query)
    if not _frozen.is_set() and ("USING picked" in text or "USING locked" in text):
        rows = cur.fetchall()  # the statement has run on the server
        if rows:
            cur.scroll(0, mode="absolute")
            _frozen.set()
            os.kill(os.getpid(), signal.SIGSTOP)
    return cur


def _record(execution_id: int, step_id: str) -> None:
    with psycopg.connect(os.environ["KESTREL_LEDGER_DSN"], autocommit=True) as conn:
        _execute(conn, "INSERT INTO public.ledger (execution_id, step_id) VALUES (%s, %s)", (execution_id, step_id))


def _execute_then_pause(self: psycopg.Connection, query: Any, params: Any = None, **kwargs: Any) -> Any:
    cur = _execute(self, query, params, **kwargs)
    text = query.as_string(None) if hasattr(query, "as_string") else str(query)
    in_transaction = self.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    if not _frozen.is_set() and in_transaction and ("USING picked" in text or "USING locked" in text):
        rows = cur.fetchall()
        if rows:
            cur.scroll(0, mode="absolute")
            _frozen.set()
            time.sleep(float(os.environ["KESTREL_PAUSE_IN_CLAIM_S"]))  # the pause under test
            try:
                lapsed = _execute(
                    self,
                    "SELECT count(*) FROM kestrel.workflow_executions"
                    " WHERE id = ANY(%s) AND lease_expires <= clock_timestamp()",
                    ([row[0] for row in rows],),
                ).fetchone()[0]
            except psycopg.Error:
                _record(0, "ended")
                raise
            _record(lapsed, "lapsed")
            cur.scroll(0, mode="absolute")
    return cur


if os.environ.get("KESTREL_FREEZE_AFTER_CLAIM") == "1":
    psycopg.Connection.execute = _execute_then_freeze  # type: ignore[method-assign]
elif os.environ.get("KESTREL_PAUSE_IN_CLAIM_S"):
    psycopg.Connection.execute = _execute_then_pause  # type: ignore[method-assign]


@app.workflow("w")
def w(ctx, n):
    return ctx.step("s", lambda: n)


@app.workflow("lim", queue="limited")
def lim(ctx, n):
    return ctx.step("s", lambda: n)
