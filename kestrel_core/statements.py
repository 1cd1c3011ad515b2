"""Rendering of the engine's SQL for one schema.

The engine's statements are module-level constants that name tables as ``{schema}.table``.
The schema is configuration, never user data: it is validated as a plain identifier, quoted,
and put in place once per process; every value travels as a bound parameter.
"""

from __future__ import annotations

import re
from functools import lru_cache

from psycopg import sql

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def check_schema_name(schema: str) -> str:
    """Return ``schema`` if it is a plain Postgres identifier, else raise ValueError."""
    if not isinstance(schema, str) or not _IDENTIFIER.match(schema):
        raise ValueError(
            f"invalid schema name {schema!r}: use letters, digits and underscores, "
            "starting with a letter or underscore (at most 63 characters)"
        )
    return schema


def quote_identifier(name: str) -> str:
    """Double-quote a validated identifier (no connection needed)."""
    return '"' + check_schema_name(name) + '"'


# Joined into a statement, this makes its (autocommit) transaction commit without waiting for
# the WAL flush. Used only where losing the write in a server crash is harmless: attempt
# bookkeeping, heartbeats, sweeps (redone next time), worker registration. Claims, checkpoints,
# waits and completions always commit durably; a later durable commit also flushes these.
ASYNC_COMMIT = "(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit"


# The fence. A write made under a claim (owner_id, claim_epoch) succeeds only while that claim
# is still the row's current one and the row is running: a swept, cancelled or reclaimed
# worker (even one reclaiming under the same id) writes nothing. Every advancing write uses it.
CLAIM_IS_CURRENT = "id = %(eid)s AND owner_id = %(owner)s AND claim_epoch = %(epoch)s AND status = 'running'"
# As a CTE body: also locks the row for the statement, so a concurrent sweep or cancel either
# waits for the write or wins first.
LOCK_IF_CLAIM_IS_CURRENT = (
    "SELECT id FROM {schema}.workflow_executions WHERE " + CLAIM_IS_CURRENT + " FOR NO KEY UPDATE"
)


@lru_cache(maxsize=512)
def render(statement: str, schema: str) -> sql.SQL:
    """The statement with ``{schema}`` replaced by the quoted schema name."""
    return sql.SQL(statement.replace("{schema}", quote_identifier(schema)))


def notify_channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel on which enqueues and wake-ups are announced."""
    return "kestrel:" + check_schema_name(schema)
