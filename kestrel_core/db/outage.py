"""Which database errors mean "the database is away" and which are its answer.

psycopg raises ``OperationalError`` for a lost connection, but also for errors the server
returns on a healthy one: ``QueryCanceled`` (a statement timeout or a cancel) and the
transaction rollbacks (``DeadlockDetected``, ``SerializationFailure``) are subclasses. Only an
outage is worth waiting out (the same statement succeeds once the server is back); a statement
the server refused is refused again, and a deadlock is over the moment it is reported.
"""

from __future__ import annotations

import psycopg

# SQLSTATEs of a connection the server ended or would not accept: class 08 (connection
# exception), 57P01..57P03 (admin or crash shutdown, not accepting connections yet) and 53300
# (too many connections).
_OUTAGE_STATES = frozenset({"57P01", "57P02", "57P03", "53300"})


def is_outage(exc: BaseException, conn: psycopg.Connection | psycopg.AsyncConnection | None = None) -> bool:
    """True when ``exc`` says the database could not be reached (connection refused, broken,
    closed by a restart, no pooled connection in time): the write may succeed once it is back.
    ``conn``, the connection ``exc`` came from if any, is also asked: a server that died under
    an open transaction, relayed by PgBouncer, breaks the connection with an InternalError
    ("received 2 results from command 'SAVEPOINT ...'"), not an OperationalError."""
    if conn is not None and conn.broken and isinstance(exc, psycopg.Error):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    if state is None:  # raised by the client: the connection failed, broke, or none was free
        return True
    return state.startswith("08") or state in _OUTAGE_STATES


def is_conflict(exc: BaseException) -> bool:
    """True when the server rolled the statement back to resolve a conflict with another one
    (class 40: deadlock, serialization failure): running it again is the cure."""
    return isinstance(exc, psycopg.Error) and (exc.sqlstate or "").startswith("40")
