"""The app of tests/cli/test_bulk_kill.py, run in a worker subprocess ($KESTREL_DSN): each
execution of ``bulk-slow`` runs two short steps, so that while a bulk cancel runs, rows go
from enqueued to running to success under it."""

from __future__ import annotations

import time

from kestrel_core import Kestrel

app = Kestrel()


def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@app.workflow("bulk-slow")
def bulk_slow(ctx, input):  # type: ignore[no-untyped-def]
    ctx.step("one", nap, 0.1)
    ctx.step("two", nap, 0.1)
    return input
