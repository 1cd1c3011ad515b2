"""Rendering of the engine's SQL for one schema.

The engine's statements, kept in ``.sql`` files beside the modules that run them (``sql_files``),
are written for ``psycopg.sql.SQL.format``: they name tables as ``{schema}.table`` and paste
shared fragments by name (``{claim_is_current}``, ``{async_commit}``, ``{live_statuses}``...:
``fragments``, the blocks of statements.sql); literal braces are written ``{{`` ``}}``. The
schema is configuration, never user data: it is validated as a plain identifier and composed as
``sql.Identifier``. Each (statement, schema) pair is composed once per process and cached, so
the hot path never re-composes; every value travels as a bound parameter.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import sql

from kestrel_core.base.errors import InvalidArgument
from kestrel_core.base.statuses import LIVE_STATUSES, STATUSES, TERMINAL_STATUSES, sql_array, sql_list
from kestrel_core.db.sql_files import statements_beside

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def check_schema_name(schema: str) -> str:
    """Return ``schema`` if it is a plain Postgres identifier, else raise ValueError."""
    if not isinstance(schema, str) or not _IDENTIFIER.match(schema):
        raise InvalidArgument(
            f"invalid schema name {schema!r}: use letters, digits and underscores, "
            "starting with a letter or underscore (at most 63 characters)"
        )
    return schema


def quote_identifier(name: str) -> str:
    """Double-quote a validated identifier (no connection needed)."""
    return sql.Identifier(check_schema_name(name)).as_string(None)


# The fragments, each a block of statements.sql (the comment there says where each is pasted).
SQL = statements_beside(__file__)
# A name of its own: the chaos run's mutation test replaces it (tests/chaos/workload.py).
CLAIM_IS_CURRENT = SQL.claim_is_current
# The largest input (bytes as stored, uncompressed) a claim returns ({claimed_input}).
CLAIM_INPUT_MAX_BYTES = 512

# The statuses (base/statuses.py), pasted as literals so the planner matches the partial indexes:
# ``status IN {live_statuses}``, ``status IN {terminal_statuses}``, and ``{status_order}``, every
# status as an array in the console's order (``array_position({status_order}, status)``).
STATUS_FRAGMENTS = {
    "live_statuses": sql_list(LIVE_STATUSES),
    "terminal_statuses": sql_list(TERMINAL_STATUSES),
    "status_order": sql_array(STATUSES),
}
# The prefix of the LISTEN/NOTIFY channel, ``kestrel:<schema>``. In SQL the channel is the
# schema's function ``notify_channel()`` (migration 0009), which the functions that wake
# workers call; tests/core/test_statements.py checks the two agree.
CHANNEL_PREFIX = "kestrel:"


@lru_cache(maxsize=64)
def fragments(schema: str) -> dict[str, sql.Composable]:
    """The named fragments for one schema, composed once."""
    ident = sql.Identifier(check_schema_name(schema))
    claim = sql.SQL(CLAIM_IS_CURRENT)
    max_bytes = sql.Literal(CLAIM_INPUT_MAX_BYTES)
    return {
        "schema": ident,
        "claim_is_current": claim,
        "lock_if_claim_is_current": sql.SQL(SQL.lock_if_claim_is_current).format(schema=ident, claim_is_current=claim),
        "async_commit": sql.SQL(SQL.async_commit),
        "abandon_and_wake": sql.SQL(SQL.abandon_and_wake).format(schema=ident),
        "take_claim": sql.SQL(SQL.take_claim),
        "ready_row_is_current": sql.SQL(SQL.ready_row_is_current),
        "lock_ready_and_execution": sql.SQL(SQL.lock_ready_and_execution),
        "claimed_input": sql.SQL(SQL.claimed_input).format(claim_input_max_bytes=max_bytes),
        "claim_input_max_bytes": max_bytes,
        "queue_is_limited": sql.SQL(SQL.queue_is_limited),
        "version_matches": sql.SQL(SQL.version_matches),
        "worker_is_live": sql.SQL(SQL.worker_is_live),
        **{name: sql.SQL(text) for name, text in STATUS_FRAGMENTS.items()},
    }


@lru_cache(maxsize=1024)
def render(statement: str, schema: str) -> sql.SQL:
    """The statement composed for ``schema`` (its named fragments filled), cached."""
    composed = sql.SQL(statement).format(**fragments(schema))
    return sql.SQL(composed.as_string(None))


@lru_cache(maxsize=64)
def render_migration(text: str, schema: str) -> sql.SQL:
    """A migration file composed for ``schema``.

    Migration files are frozen once applied and use braces freely in PL/pgSQL, so they are not
    format strings: only their ``{schema}`` markers are composed, as ``sql.Identifier``.
    """
    ident = sql.Identifier(check_schema_name(schema))
    parts: list[sql.Composable] = []
    for i, piece in enumerate(text.split("{schema}")):
        if i:
            parts.append(ident)
        parts.append(sql.SQL(piece))
    return sql.SQL(sql.Composed(parts).as_string(None))


def notify_channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel on which enqueues and wake-ups are announced."""
    return CHANNEL_PREFIX + check_schema_name(schema)


def one_row(row: tuple[Any, ...] | None, statement: str) -> tuple[Any, ...]:
    """The row a statement always returns (a FROM-less SELECT, an upsert, an aggregate).
    Missing, it is an engine error (the caller unwinds and the execution is retried), checked
    also under ``python -O``, where an ``assert`` would vanish."""
    if row is None:
        raise psycopg.InternalError(f"{statement} returned no row")
    return row
