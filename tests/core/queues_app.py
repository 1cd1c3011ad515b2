"""A Kestrel app with limited queues, run in worker subprocesses by tests/core/test_queues.py
(DSN from $KESTREL_DSN). Every workflow sleeps ``input["s"]`` seconds and returns its input.

Each queue holds three workflows (``quick-0`` .. ``quick-2`` in ``limited``, and so on);
``$QUEUES_APP_N`` picks the one of each this process registers, so concurrent claimers look at
different rows of a queue (with one shared head they would collide on the same row and hide a
missing lock)."""

from __future__ import annotations

import os
import time
from datetime import timedelta

from kestrel_core import Kestrel

app = Kestrel()
app.queue("limited", concurrency=3)
app.queue("rated", rate=(5, timedelta(seconds=2)))
app.queue("keyed", per_key=1)
app.queue("per-minute", rate=(4, timedelta(minutes=1)))


def nap(ctx, input):
    time.sleep((input or {}).get("s", 0))
    return input


def timed_nap(ctx, input):
    """Returns when it ran (wall clock), so the test sees overlaps exactly instead of sampling."""
    began = time.time()
    time.sleep(input["s"])
    return {**input, "began": began, "ended": time.time()}


N = os.environ.get("QUEUES_APP_N", "0")
app.workflow(f"quick-{N}", queue="limited")(nap)
app.workflow(f"rated-{N}", queue="rated")(nap)
app.workflow(f"keyed-{N}", queue="keyed")(timed_nap)
app.workflow(f"minute-{N}", queue="per-minute")(nap)
app.workflow(f"probe-{N}")(nap)  # default queue: shows this worker claimed again
