"""What a running execution writes under its claim, each write fenced by it: step
boundaries (``boundary``), written for many executions in one statement (``group_commit``);
checkpoints (``checkpoint``: a checkpoint is a row of the ``operation_outputs`` table, the
design's name, kept); parked sleeps and approval gates (``waits``); events and child workflows
(``events``, ``children``).

Front ends (the console, bench) may use the names in ``__all__`` below, no module of it.

May import: base, db, dispatch.
"""

from kestrel_core.durable.boundary import WRITE as WRITE_BOUNDARIES
from kestrel_core.durable.boundary import Attempt, Boundary, Completion, Finish
from kestrel_core.durable.boundary import write as write_boundaries

# The step boundaries' statement: for bench/ceiling.py, which runs it under pgbench; the
# boundaries themselves: for bench/walcost.py, which measures what each writes.
__all__ = ["WRITE_BOUNDARIES", "Attempt", "Boundary", "Completion", "Finish", "write_boundaries"]
