"""What the app and operators do to executions besides running them: read one back
(``execution``), the audited actions approve, reject, cancel, requeue and fork (``actions``),
the same in bulk on a frozen set of ids (``bulk``), schedules as rows and their cron arithmetic
(``schedules``, ``cron``; the worker ticks them: ``kestrel_core.engine.scheduler``), retention
(``prune``), and who is acting when an audited action names no one (``identity``).

Front ends (the console, bench) may use the names in ``__all__`` below, no module of it.

May import: base, db, dispatch.
"""

from kestrel_core.admin.actions import check_execution_id
from kestrel_core.admin.bulk import ACTIONS as BULK_ACTIONS
from kestrel_core.admin.bulk import DEFAULT_TTL as BULK_TTL
from kestrel_core.admin.bulk import MAX_ROWS as BULK_MAX_ROWS
from kestrel_core.admin.bulk import BulkAction, Preview, Progress
from kestrel_core.admin.bulk import apply as bulk_apply
from kestrel_core.admin.bulk import batches as bulk_batches
from kestrel_core.admin.bulk import freeze as bulk_freeze
from kestrel_core.admin.bulk import items as bulk_items
from kestrel_core.admin.bulk import reasons as bulk_reasons
from kestrel_core.admin.bulk import status as bulk_status
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
    "BULK_ACTIONS",
    "BULK_MAX_ROWS",
    "BULK_TTL",
    "PRUNE_BATCH_SIZE",
    "BulkAction",
    "HistoryRange",
    "Preview",
    "Progress",
    "PrunableGroup",
    "PruneResult",
    "bulk_apply",
    "bulk_batches",
    "bulk_freeze",
    "bulk_items",
    "bulk_reasons",
    "bulk_status",
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
