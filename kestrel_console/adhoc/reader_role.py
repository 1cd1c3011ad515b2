"""Layer 3 of the ad-hoc SQL guard, independent of parsing: the query runs as the read-only
role, and nothing session-level it could leave behind survives it.

Inside the read-only transaction, ``assume_reader`` switches to ``kestrel_reader``
(``set_config('role', ..., true)``, i.e. ``SET LOCAL ROLE``; created by ``kestrel_core.db.roles``:
USAGE on the schema, SELECT on its tables, nothing else) when the login may assume it. Postgres
then refuses, whatever the text, writes, other sessions' signals, server files, and Kestrel's
functions. Where it cannot (no such role, login not a member, no rights on the schema),
``run_read_only`` refuses the query with one line naming the grant to ask for: ad-hoc SQL runs
only as the read-only role.

``privilege`` finds what no role switch can take away: a login that is a superuser, has
BYPASSRLS, CREATEROLE or REPLICATION, is a member of a predefined role with server-side powers
(``SERVER_POWERS``: signalling sessions, server files and programs, all data...), owns the
Kestrel schema, one of its tables or the database, or may become a role that is, has or owns
any of these (``SET ROLE`` needs only membership).
Such a session may switch back with ``set_config('role', ...)`` (which only layer 1 refuses),
so ``run_read_only`` refuses to run ad-hoc SQL on it unless told otherwise (a separate
read-only login is the way; ``allow_privileged`` the marked exception).

After the transaction, ``release_session_state`` drops what a rollback does not undo: session
advisory locks and prepared statements. Settings (``set_config(..., false)``) are undone by the
rollback; temporary objects cannot be created in a READ ONLY transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql

from kestrel_core.db import DEFAULT_READER_ROLE, statements_beside

SQL = statements_beside(__file__)

__all__ = ["DEFAULT_READER_ROLE", "ReaderStatus", "assume_reader", "privilege", "release_session_state"]

# Predefined roles whose members hold server-side powers no SET ROLE takes away: the session
# may switch back to its login (set_config('role', ...), which only layer 1 refuses), and then
# signal other sessions, read or write the server's files, run programs, read or write every
# table, or read every setting and statistic.
SERVER_POWERS = (
    "pg_execute_server_program",
    "pg_read_server_files",
    "pg_write_server_files",
    "pg_signal_backend",
    "pg_checkpoint",
    "pg_read_all_data",
    "pg_write_all_data",
    "pg_monitor",
    "pg_read_all_settings",
    "pg_read_all_stats",
    "pg_stat_scan_tables",
    # added by PostgreSQL 16 to 18: subscriptions (connections out of the server), the
    # superuser's reserved connections, VACUUM, REINDEX and LOCK TABLE on every table, and
    # signalling autovacuum workers
    "pg_create_subscription",
    "pg_use_reserved_connections",
    "pg_maintain",
    "pg_signal_autovacuum_worker",
)
DEALLOCATE = sql.SQL(SQL.deallocate)


@dataclass(frozen=True)
class ReaderStatus:
    """Whether a query ran as the read-only role, and what the login could do beyond it."""

    role: str
    login: str
    superuser: bool
    assumed: bool
    problem: str | None = None  # why the role was not assumed
    privileged: str | None = None  # "login postgres is a superuser", when it is (allowed then)

    @property
    def notice(self) -> str | None:
        """One line for the operator when layer 3 is weaker than promised, else None."""
        if self.assumed and not self.privileged:
            return None
        if self.assumed:
            return (
                f"note: {self.privileged} (ad-hoc SQL allowed on it by --allow-privileged-sql): "
                f"queries run as {self.role}, but such a session can switch back, so only "
                "the guard's allowlist stops what the role would; use --reader-dsn instead"
            )
        who = f"login {self.login}" + (" (a superuser)" if self.superuser else "")
        return f"note: {self.problem}: queries run with the rights of {who}"


def assume_reader(conn: psycopg.Connection, role: str, schema: str) -> ReaderStatus:
    """``SET LOCAL ROLE role`` in the current transaction when the login may; say how it went."""
    row = conn.execute(SQL.assume, {"role": role, "schema": schema}).fetchone()
    assert row is not None
    login, superuser, exists, member, usage, _ = row
    problem = None
    if not exists:
        problem = f"role {role} does not exist (`kestrel-console migrate` creates it)"
    elif not member:
        problem = f"login {login} may not assume role {role} (ask an admin for: GRANT {role} TO {login})"
    elif not usage:
        problem = f"role {role} has no rights on schema {schema} (`kestrel-console migrate` grants them)"
    return ReaderStatus(role, login, bool(superuser), problem is None, problem)


def privilege(conn: psycopg.Connection, schema: str) -> str | None:
    """What makes this login more than the read-only role can contain ("login postgres is a
    superuser", "login bob may become role admin, which has CREATEROLE", "login app owns table
    kestrel.queues"), or None."""
    row = conn.execute(SQL.privilege, {"powers": list(SERVER_POWERS), "schema": schema}).fetchone()
    if row is None:
        return None
    login, role, what = row
    if role in SERVER_POWERS:
        return f"login {login} is a member of {role} (a predefined role with powers on the server)"
    which = f"is {what}" if what == "a superuser" else what
    if role == login:
        return f"login {login} {which}"
    return f"login {login} may become role {role}, which {which}"


def release_session_state(conn: psycopg.Connection) -> None:
    """Release session advisory locks and drop prepared statements the query left behind.

    Runs outside the query's transaction (rolled back by then), as the login itself. Releases
    every session advisory lock of the connection: give ad-hoc SQL a connection of its own.
    """
    if conn.closed:
        return
    for attempt in (1, 2):  # a cancel meant for the query may land on this statement instead
        try:
            row = conn.execute(SQL.release).fetchone()
            for name in (row[1] if row else None) or []:
                conn.execute(DEALLOCATE.format(name=sql.Identifier(name)))
            return
        except psycopg.errors.QueryCanceled:
            if attempt == 2:
                raise
        finally:
            if not conn.autocommit and not conn.closed:
                conn.rollback()
