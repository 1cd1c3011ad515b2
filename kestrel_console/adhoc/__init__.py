"""Ad-hoc SQL and saved reports, run read-only in three layers.

- ``guard``: layer 1, before anything reaches Postgres: the text bounded (64 KiB, parsed on a
  deep stack), parsed by Postgres's own grammar (libpg_query), exactly one read statement,
  every function, operator and type in its tree on an allowlist (``allowlist``, built from the
  catalog by ``allowlist_build``), value builders argument-bounded; then ``resolve``: every
  name looked up in the live catalog of the session (every overload, every schema of the
  search path, views' and policies' definitions), each object it may reach allowed.
- ``read_only``: layer 2, a READ ONLY transaction with a statement timeout, always rolled back,
  the lexing settings pinned (client encoding UTF8) and the server's bytes of the text checked,
  results bounded by rows and bytes measured on the server, a wall clock of the console's own
  (``hard_limit``); and layer 3, the same transaction run as the read-only
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
