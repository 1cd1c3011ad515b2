"""Connecting to Postgres: DSN resolution, pools, and errors a person can read."""

from __future__ import annotations

import os
import re

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool

from .errors import DatabaseUnavailable

APPLICATION_NAME = "kestrel"


def resolve_dsn(dsn: str | None) -> str:
    """The DSN to use: the argument, else ``$KESTREL_DSN``, else libpq defaults (PGHOST, ...)."""
    if dsn is None:
        dsn = os.environ.get("KESTREL_DSN", "")
    return dsn


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)([^@\s]*)(@)")
_KEYWORD_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def mask_dsn(text: str) -> str:
    """Hide every password in a DSN or in a message that quotes one."""
    text = _URL_PASSWORD.sub(r"\1****\3", text)
    return _KEYWORD_PASSWORD.sub(r"\1****", text)


def describe_target(dsn: str) -> str:
    """A short 'user@host:port/db' naming where a DSN points, without its password."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return mask_dsn(dsn)
    host = params.get("host") or os.environ.get("PGHOST") or "local socket"
    port = params.get("port") or os.environ.get("PGPORT") or "5432"
    user = params.get("user") or os.environ.get("PGUSER") or ""
    dbname = params.get("dbname") or os.environ.get("PGDATABASE") or user
    return f"{user + '@' if user else ''}{host}:{port}/{dbname}"


def unavailable(dsn: str, exc: Exception) -> DatabaseUnavailable:
    """A DatabaseUnavailable naming the target and libpq's reason, password masked."""
    reason = mask_dsn(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    return DatabaseUnavailable(
        f"cannot connect to PostgreSQL at {describe_target(dsn)}: {reason}\n"
        "Check --dsn / $KESTREL_DSN and that the server is running."
    )


def connect(
    dsn: str, *, autocommit: bool = True, application_name: str = APPLICATION_NAME,
    connect_timeout: int = 10, prepare: bool = True,
) -> psycopg.Connection:
    """Open one connection, turning connection failures into DatabaseUnavailable."""
    try:
        conninfo = make_conninfo(dsn, application_name=application_name, connect_timeout=connect_timeout)
        conn = psycopg.connect(conninfo, autocommit=autocommit)
    except psycopg.ProgrammingError as exc:  # malformed DSN
        raise DatabaseUnavailable(f"invalid DSN {mask_dsn(dsn)!r}: {mask_dsn(str(exc))}") from None
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
    dsn: str, *, min_size: int, max_size: int, application_name: str = APPLICATION_NAME,
    prepare: bool = True, name: str = "kestrel", check: bool = True,
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

    try:
        conninfo = make_conninfo(dsn, application_name=application_name, connect_timeout=10)
    except psycopg.ProgrammingError as exc:
        raise DatabaseUnavailable(f"invalid DSN {mask_dsn(dsn)!r}: {mask_dsn(str(exc))}") from None
    return ConnectionPool(
        conninfo, min_size=min_size, max_size=max_size, configure=configure,
        check=ConnectionPool.check_connection if check else None, open=False, name=name, timeout=30,
    )
