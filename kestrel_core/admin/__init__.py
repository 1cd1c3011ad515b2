"""What the app and operators do to executions besides running them: read one back
(``execution``), the audited actions approve, reject, cancel and requeue (``actions``),
schedules as rows and their cron arithmetic (``schedules``, ``cron``; the worker ticks them:
``kestrel_core.engine.scheduler``), retention (``prune``), and who is acting when an audited
action names no one (``identity``).

Front ends (the console, bench) may use the names in ``__all__`` below, no module of it.

May import: base, db, dispatch.
"""

from kestrel_core.admin.actions import check_execution_id
from kestrel_core.admin.cron import check_cron, check_timezone
from kestrel_core.admin.prune import DEFAULT_BATCH_SIZE as PRUNE_BATCH_SIZE
from kestrel_core.admin.prune import (
    HistoryRange,
    PrunableGroup,
    PruneResult,
    connection_runner,
    cutoff_for,
    droppable_ranges,
    parse_age,
    prunable,
)
from kestrel_core.admin.prune import prune as prune_finished
from kestrel_core.admin.schedules import check as check_schedule

__all__ = [
    "PRUNE_BATCH_SIZE",
    "HistoryRange",
    "PrunableGroup",
    "PruneResult",
    "check_cron",
    "check_execution_id",
    "check_schedule",
    "check_timezone",
    "connection_runner",
    "cutoff_for",
    "droppable_ranges",
    "parse_age",
    "prunable",
    "prune_finished",
]
