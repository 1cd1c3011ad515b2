"""Talking to PostgreSQL: connections and pools and the errors a person can read, passwords
masked by ``base.masking`` (``connection``), the engine's SQL rendered for one schema
(``statements``, its shared fragments in ``statements.sql``), the named statements kept in
``.sql`` files beside the modules that run them (``sql_files``; docs/how-it-works.md lists every
file), several statements in one round trip through libpq for the enqueue batch's hot path
(``pipeline``), which errors mean the database is away (``outage``), versioned migrations and
the schema's functions kept as code (``migrate``, ``migrations/NNNN_name.sql``,
``schema/functions/<name>.sql``), and the least-privilege roles (``roles``).

Front ends (the console, bench) may use the names in ``__all__`` below, no module of it.

May import: base.
"""

from kestrel_core.db.connection import close_quietly, connect, describe_target, resolve_dsn, unavailable
from kestrel_core.db.migrate import check_current
from kestrel_core.db.roles import (
    DEFAULT_OPERATOR_ROLE,
    DEFAULT_READER_ROLE,
    DEFAULT_WORKER_ROLE,
    RoleNames,
    RolesReport,
    ensure_roles,
)
from kestrel_core.db.sql_files import statements_beside
from kestrel_core.db.statements import check_schema_name, one_row, render

__all__ = [
    "DEFAULT_OPERATOR_ROLE",
    "DEFAULT_READER_ROLE",
    "DEFAULT_WORKER_ROLE",
    "RoleNames",
    "RolesReport",
    "check_current",
    "check_schema_name",
    "close_quietly",
    "connect",
    "describe_target",
    "ensure_roles",
    "one_row",
    "render",
    "resolve_dsn",
    "statements_beside",
    "unavailable",
]
