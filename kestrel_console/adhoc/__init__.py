"""Ad-hoc SQL and saved reports, run read-only in three layers.

- ``guard``: layer 1, before anything reaches Postgres: the text parsed by Postgres's own grammar
  (libpg_query), exactly one read statement, every function, operator and type in its tree on
  an allowlist (``allowlist``, built from the catalog by ``allowlist_build``).
- ``read_only``: layer 2, a READ ONLY transaction with a statement timeout, always rolled back,
  results bounded by rows and bytes; and layer 3, the same transaction run as the read-only
  role (``SET LOCAL ROLE kestrel_reader``) and everything session-level released after it.
"""

from .guard import QueryRefused, check_read_only
from .read_only import (
    DEFAULT_MAX_BYTES,
    QueryFailed,
    QueryResult,
    QueryTimeout,
    ReaderStatus,
    run_read_only,
    timeout_ms,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "QueryFailed",
    "QueryRefused",
    "QueryResult",
    "QueryTimeout",
    "ReaderStatus",
    "check_read_only",
    "run_read_only",
    "timeout_ms",
]
