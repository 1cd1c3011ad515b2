"""Connecting to Postgres: DSN resolution, pools, and errors a person can read."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from kestrel_core.base.errors import DatabaseUnavailable
from kestrel_core.base.masking import connection_reason, hide_secrets, mask_dsn, parser_reason, password_is_ambiguous
from kestrel_core.db.sql_files import statements_beside

SQL = statements_beside(__file__)

APPLICATION_NAME = "kestrel"

T = TypeVar("T")


def resolve_dsn(dsn: str | None) -> str:
    """The DSN to use: the argument, else ``$KESTREL_DSN``, else libpq defaults (PGHOST, ...)."""
    if dsn is None:
        dsn = os.environ.get("KESTREL_DSN", "")
    return dsn


def invalid_dsn(dsn: str, exc: Exception) -> DatabaseUnavailable:
    """A DatabaseUnavailable for a DSN libpq cannot parse, built from masked parts only."""
    return DatabaseUnavailable(
        f"invalid DSN {mask_dsn(dsn)!r}: {parser_reason(dsn, exc)}\n"
        "Check --dsn / $KESTREL_DSN (a password with spaces, '@' or '%' must be percent-encoded "
        "in a URL, or quoted in the keyword form)."
    )


def describe_target(dsn: str) -> str:
    """A short 'user@host:port/db' naming where a DSN points, without its password."""
    try:
        params = conninfo_to_dict(dsn)
        if password_is_ambiguous(dsn):
            raise psycopg.ProgrammingError("ambiguous password")
    except (psycopg.ProgrammingError, UnicodeError):
        return mask_dsn(dsn.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))
    host = params.get("host") or os.environ.get("PGHOST") or "local socket"
    port = params.get("port") or os.environ.get("PGPORT") or "5432"
    user = str(params.get("user") or os.environ.get("PGUSER") or "")
    dbname = params.get("dbname") or os.environ.get("PGDATABASE") or user
    return hide_secrets(f"{user + '@' if user else ''}{host}:{port}/{dbname}", dsn)


def check_dsn(dsn: str) -> None:
    """Refuse a DSN that is not valid UTF-8 (libpq's parser would fail on its encoding, with a
    traceback quoting it), a URL whose password holds a raw '@' (libpq would cut the password at
    the first one and try to reach a host named after the rest of it), and any DSN whose password
    libpq reads otherwise than it is written: no message could then name its parts safely."""
    try:
        dsn.encode("utf-8")
    except UnicodeEncodeError:
        shown = dsn.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise DatabaseUnavailable(
            f"invalid DSN {mask_dsn(shown)!r}: it is not valid UTF-8\n"
            "Check --dsn / $KESTREL_DSN (and the terminal's encoding)."
        ) from None
    start = dsn.find("://")
    if start >= 0 and dsn[start + 3 :].split("?", 1)[0].count("@") > 1:
        raise DatabaseUnavailable(
            f"invalid DSN {mask_dsn(dsn)!r}: its user:password part holds '@'\n"
            "Percent-encode it in the URL (%40), or use the keyword form: password='...'."
        )
    if password_is_ambiguous(dsn):
        raise DatabaseUnavailable(
            f"invalid DSN {mask_dsn(dsn)!r}: libpq does not read its password as written "
            "(a space, quote, '/', '&' or '%' in it?)\n"
            "Percent-encode the user and password in a URL, or quote the password in the keyword form: password='...'."
        )


def unavailable(dsn: str, exc: Exception) -> DatabaseUnavailable:
    """A DatabaseUnavailable naming the target and libpq's reason, password masked."""
    reason = connection_reason(dsn, exc)
    return DatabaseUnavailable(
        f"cannot connect to PostgreSQL at {describe_target(dsn)}: {reason}\n"
        "Check --dsn / $KESTREL_DSN and that the server is running."
    )


def _conninfo(dsn: str, application_name: str, *, connect_timeout: int) -> str:
    """``dsn`` checked and completed with the application name and timeout; a malformed one is
    DatabaseUnavailable naming it without its password."""
    check_dsn(dsn)
    try:
        return make_conninfo(dsn, application_name=application_name, connect_timeout=connect_timeout)
    except (psycopg.ProgrammingError, UnicodeError) as exc:
        # UnicodeDecodeError: a percent-encoded value that is not UTF-8 (psycopg decodes libpq's parse).
        raise invalid_dsn(dsn, exc) from None


def connect(
    dsn: str,
    *,
    autocommit: bool = True,
    application_name: str = APPLICATION_NAME,
    connect_timeout: int = 10,
    prepare: bool = True,
) -> psycopg.Connection:
    """Open one connection, turning connection failures into DatabaseUnavailable."""
    conninfo = _conninfo(dsn, application_name, connect_timeout=connect_timeout)
    try:
        conn = psycopg.connect(conninfo, autocommit=autocommit)
    except psycopg.ProgrammingError as exc:  # malformed DSN
        raise invalid_dsn(dsn, exc) from None
    except psycopg.OperationalError as exc:
        raise unavailable(dsn, exc) from None
    if not prepare:
        conn.prepare_threshold = None
    return conn


def close_quietly(conn: psycopg.Connection | None) -> None:
    """Close a connection that may already be broken: an error while closing changes nothing."""
    if conn is not None:
        try:
            conn.close()
        except Exception:
            pass


def make_pool(
    dsn: str,
    *,
    min_size: int,
    max_size: int,
    application_name: str = APPLICATION_NAME,
    prepare: bool = True,
    name: str = "kestrel",
    check: bool = True,
) -> ConnectionPool:
    """A connection pool of autocommit connections.

    ``check=True`` pings a connection on checkout (one round trip) so a caller never gets one a
    server restart broke; the worker turns it off because it retries failed calls itself, and a
    broken connection is dropped when returned. ``prepare=False`` turns off server-side prepared
    statements (PgBouncer transaction pooling).
    """

    def configure(conn: psycopg.Connection) -> None:
        conn.autocommit = True
        if not prepare:
            conn.prepare_threshold = None

    return ConnectionPool(
        configure=configure,
        check=ConnectionPool.check_connection if check else None,
        **_pool_arguments(dsn, application_name, min_size, max_size, name),
    )


def make_async_pool(
    dsn: str,
    *,
    min_size: int,
    max_size: int,
    application_name: str = APPLICATION_NAME,
    prepare: bool = True,
    name: str = "kestrel-async",
) -> AsyncConnectionPool:
    """``make_pool`` for asyncio: autocommit AsyncConnections, each pinged on checkout."""

    async def configure(conn: psycopg.AsyncConnection) -> None:
        await conn.set_autocommit(True)
        if not prepare:
            conn.prepare_threshold = None

    return AsyncConnectionPool(
        configure=configure,
        check=AsyncConnectionPool.check_connection,
        **_pool_arguments(dsn, application_name, min_size, max_size, name),
    )


def _pool_arguments(dsn: str, application_name: str, min_size: int, max_size: int, name: str) -> dict[str, Any]:
    """What the two pools share: the server, the sizes, opened by their owner, a 30 s checkout."""
    conninfo = _conninfo(dsn, application_name, connect_timeout=10)
    return {
        "conninfo": conninfo,
        "min_size": min_size,
        "max_size": max_size,
        "open": False,
        "name": name,
        "timeout": 30,
    }


class ConnectionRunner(Protocol):
    """``run(fn)``: ``fn``'s result, ``fn`` called with a connection. A worker's ``db`` (which
    retries while the database restarts) is one; ``prune.connection_runner`` makes one."""

    def __call__(self, fn: Callable[[psycopg.Connection], T], /) -> T: ...


# How long a close waits for a statement under way before it cancels it.
_CLOSE_WAIT_S = 0.5


class OwnSession:
    """One autocommit connection of its own, for a thread that must never wait for a pool's
    connection (the heartbeat) or that keeps settings for its session (the claim): opened on
    first use with ``settings`` (``SET name = value``), dropped when it broke, and opened again
    by the next call. Used by one thread at a time."""

    def __init__(self, dsn: str, *, application_name: str, settings: dict[str, str], prepare: bool = True) -> None:
        self._conninfo = _conninfo(dsn, application_name, connect_timeout=10)
        self._settings = dict(settings)
        self._prepare = prepare
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """``fn``'s result, called with the session; a connection that broke on the way is
        dropped (the error is raised: the caller decides whether to try again)."""
        with self._lock:
            conn = self._conn
            if conn is None or conn.closed or conn.broken:
                close_quietly(conn)
                self._conn = conn = self._open()
            try:
                return fn(conn)
            except psycopg.Error:
                if conn.broken or conn.closed or conn.info.transaction_status != TransactionStatus.IDLE:
                    close_quietly(conn)
                    self._conn = None
                raise

    def _open(self) -> psycopg.Connection:
        conn = psycopg.connect(self._conninfo, autocommit=True)
        try:
            if not self._prepare:
                conn.prepare_threshold = None
            for name, value in self._settings.items():
                conn.execute(sql.SQL(SQL.set_setting).format(name=sql.Identifier(name), value=sql.Literal(value)))
        except BaseException:
            close_quietly(conn)
            raise
        return conn

    def interrupt(self) -> None:
        """Cancel the statement under way on the thread that uses the session, if any (a claim
        waiting for a lock someone else holds); an idle session is left alone (the server
        ignores a cancel that finds nothing running)."""
        conn = self._conn
        if conn is not None and self._lock.locked():
            try:
                conn.cancel_safe(timeout=_CLOSE_WAIT_S)
            except Exception:  # the caller goes on: nothing to report it to
                pass

    def close(self) -> None:
        """Close the connection (the next call opens another). A statement under way on the
        thread that uses it (a claim waiting for a row lock) is cancelled first: a worker's stop
        never waits for as long as someone else holds a lock."""
        # Each statement is cancelled, not just the first: a claim goes on after a cancelled
        # walk (it takes it for a statement timeout) with other statements.
        give_up = time.monotonic() + 5.0
        while not self._lock.acquire(timeout=_CLOSE_WAIT_S):
            if time.monotonic() > give_up:
                return  # still in use: left to the process's exit
            self.interrupt()
        try:
            close_quietly(self._conn)
            self._conn = None
        finally:
            self._lock.release()


def wrong_connection(conn: object, wanted: type) -> str:
    """Why ``conn`` cannot be the ``conn=`` of a client that takes ``wanted`` connections (the
    sync client takes a psycopg.Connection, the async one an AsyncConnection)."""
    other = "an AsyncConnection: use AsyncKestrel" if wanted is psycopg.Connection else "a Connection: use Kestrel"
    kind = isinstance(conn, (psycopg.Connection, psycopg.AsyncConnection))
    return f"conn= must be a psycopg.{wanted.__name__}, not {type(conn).__name__}" + (f" ({other})" if kind else "")
