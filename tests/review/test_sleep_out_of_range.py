"""Review of "Every exception a step or a workflow raises ends in an outcome ... None ... strands
the execution ... Before, each was replayed every lease, forever" and "Invalid input gets a clear
error" (docs/guarantees.md).

Reproduction: a workflow calls ``ctx.sleep("nap", timedelta(days=999_999_999))`` (a valid
``timedelta``; ``wait_for_approval(timeout=...)`` likewise). Nothing checks it where it is given:
the park's ``now() + interval`` fails on the server (22008 timestamp out of range), which the
engine takes for a failed engine write (``event=engine_write_failed``): the execution unwinds,
its lease lapses, it is replayed, and fails the same way every lease, forever, never ending as
``error``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kestrel_core import Kestrel
from tests.waiting import wait_for


def test_a_sleep_beyond_the_calendar_ends_the_execution_instead_of_replaying_it_forever(
    app: Kestrel, start_worker
) -> None:
    @app.workflow("napper")
    def napper(ctx: Any, _input: Any) -> str:
        ctx.sleep("nap", timedelta(days=999_999_999))
        return "woke"

    start_worker(app, lease=timedelta(seconds=1))
    eid = app.enqueue("napper", None)
    wait_for(lambda: app.get(eid).done, timeout=10, what="the execution to end in an outcome")
    assert app.get(eid).status == "error"
