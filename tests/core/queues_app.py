"""A Kestrel app with limited queues, run in worker subprocesses by tests/core/test_queues.py
(DSN from $KESTREL_DSN). Every workflow sleeps ``input["s"]`` seconds and returns its input."""

from __future__ import annotations

import time
from datetime import timedelta

from kestrel_core import Kestrel

app = Kestrel()
app.queue("limited", concurrency=3)
app.queue("rated", rate=(5, timedelta(seconds=2)))
app.queue("keyed", per_key=1)


def nap(ctx, input):
    time.sleep((input or {}).get("s", 0))
    return input


app.workflow("quick", queue="limited")(nap)
app.workflow("rated_job", queue="rated")(nap)
app.workflow("keyed_job", queue="keyed")(nap)
