"""The app of tests/core/test_claim_freeze.py, run in a worker subprocess ($KESTREL_DSN).

With $KESTREL_FREEZE_AFTER_CLAIM=1 the process stops itself (SIGSTOP) right after its first
claim statement that took rows, as a GC pause or an operator's SIGSTOP could: before that
claim's COMMIT when the claim is a transaction the client commits, after it when the claim
commits on the server. The claim statements are told by what they take (``USING picked``: the
fast path, ``USING chosen``: the limited claim). Their rows are read, then the cursor is
rewound for the engine to read them.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import psycopg

from kestrel_core import Kestrel

app = Kestrel()
app.queue("limited", concurrency=8)
_frozen = threading.Event()
_execute = psycopg.Connection.execute


def _execute_then_freeze(self: psycopg.Connection, query: Any, params: Any = None, **kwargs: Any) -> Any:
    cur = _execute(self, query, params, **kwargs)
    text = query.as_string(None) if hasattr(query, "as_string") else str(query)
    if not _frozen.is_set() and ("USING picked" in text or "USING chosen" in text):
        rows = cur.fetchall()  # the statement has run on the server
        if rows:
            cur.scroll(0, mode="absolute")
            _frozen.set()
            os.kill(os.getpid(), signal.SIGSTOP)
    return cur


if os.environ.get("KESTREL_FREEZE_AFTER_CLAIM") == "1":
    psycopg.Connection.execute = _execute_then_freeze  # type: ignore[method-assign]


@app.workflow("w")
def w(ctx, n):
    return ctx.step("s", lambda: n)


@app.workflow("lim", queue="limited")
def lim(ctx, n):
    return ctx.step("s", lambda: n)
