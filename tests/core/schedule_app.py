"""A Kestrel app run in worker subprocesses by the schedule tests (DSN from $KESTREL_DSN):
one schedule ticking every second."""

from __future__ import annotations

from kestrel_core import Kestrel

app = Kestrel()


@app.schedule("* * * * * *", name="every-second")
def tick(ctx, input):
    return input["scheduled_at"]
