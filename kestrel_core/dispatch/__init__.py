"""Executions in and out of workers: ``enqueue`` (rows of one statement; ``enqueue_batch``
group-commits a process's concurrent calls), users' keys and queue names (``keys``), queue
declarations and limits (``queues``), the claim (``claim``; ``limited_claim`` for queues with
limits), leases (``lease``), and the leaderless sweeps that hand work back or end it
(``sweeper``, ``deadlines``).

Front ends (the console, bench) may use the names in ``__all__`` below, no module of it.

May import: base, db.
"""

from kestrel_core.dispatch.claim import CLAIM, ORDERED_PLAN, START_KEY, Claim
from kestrel_core.dispatch.claim import claim as claim_executions
from kestrel_core.dispatch.enqueue import enqueue_many
from kestrel_core.dispatch.lease import heartbeat
from kestrel_core.dispatch.sweeper import FOLD_EVERY_S, ensure_partitions, fold_activity, fold_counts

# The claim's statement, its plan setting and its start key: for bench/ceiling.py, which runs
# the engine's own SQL under pgbench; the claim and the heartbeat themselves: for
# bench/walcost.py, which measures what each writes; the history's ranges ahead: for the soak,
# which sizes its ranges before the load; the workers' once-a-minute folds: for bench/console.py,
# whose seeded history is read as a running engine's is.
__all__ = [
    "CLAIM",
    "FOLD_EVERY_S",
    "ORDERED_PLAN",
    "START_KEY",
    "Claim",
    "claim_executions",
    "enqueue_many",
    "ensure_partitions",
    "fold_activity",
    "fold_counts",
    "heartbeat",
]
