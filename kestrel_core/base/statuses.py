"""An execution's statuses as lists and SQL literals. They are defined once, in
``kestrel_core.lifecycle`` (the enum ``ExecutionStatus`` and its transitions), and re-exported
here: every list of them in the engine's and the console's Python and Python-composed SQL
comes from there.

SQL that Python does not compose (the schema's functions in ``db/schema/functions``, the
migrations' indexes and CHECK, ``queries/*.sql``) must spell the lists out: tests/core/
test_statuses.py finds every spelled list and checks it against these.
"""

from __future__ import annotations

from collections.abc import Iterable

from kestrel_core.lifecycle.states import LIVE_STATUSES, STATUSES, TERMINAL_STATUSES

__all__ = ["LIVE_STATUSES", "STATUSES", "TERMINAL_STATUSES", "in_order", "sql_array", "sql_list"]


def in_order(statuses: Iterable[str]) -> tuple[str, ...]:
    """``statuses`` in STATUSES order (ValueError on one that is not a status)."""
    wanted = set(statuses)
    unknown = wanted - set(STATUSES)
    if unknown:
        raise ValueError(f"not statuses: {sorted(unknown)}")
    return tuple(s for s in STATUSES if s in wanted)


def sql_list(statuses: Iterable[str]) -> str:
    """The statuses as an SQL list of literals, ``('enqueued', 'running', 'waiting', 'paused')``: literal,
    not a parameter, so the planner matches the partial indexes written with the same list."""
    return f"({_literals(statuses)})"


def sql_array(statuses: Iterable[str]) -> str:
    """The statuses as an SQL array literal in STATUSES order, ``ARRAY['enqueued', ...]``."""
    return f"ARRAY[{_literals(statuses)}]"


def _literals(statuses: Iterable[str]) -> str:
    return ", ".join(f"'{s}'" for s in in_order(statuses))
