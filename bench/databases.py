"""A dedicated, fresh database for every benchmark run, dropped afterwards."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kestrel_core import Kestrel

DEFAULT_ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"

# Set while the benchmarks share the server with other work (``sharing_the_server``): what
# drops their databases instead of DROP DATABASE at once.
_drop_later: Callable[[str], None] | None = None


def admin_dsn() -> str:
    """Where benchmark databases are created: ``$KESTREL_BENCH_DSN``, else the local server."""
    return os.environ.get("KESTREL_BENCH_DSN") or os.environ.get("KESTREL_TEST_DSN") or DEFAULT_ADMIN_DSN


def create_database(admin: str, prefix: str = "kestrel_bench") -> str:
    """Create an empty database and return its DSN."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(admin, dbname=name)


def drop_database(admin: str, dsn: str) -> None:
    """Drop a benchmark's database (or hand it on, while ``sharing_the_server``)."""
    if _drop_later is not None:
        _drop_later(dsn)
        return
    name = conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def fresh_database(admin: str, *, kestrel: bool = True, prefix: str = "kestrel_bench") -> Iterator[str]:
    """A new database (Kestrel schema migrated unless ``kestrel=False``), dropped on exit."""
    dsn = create_database(admin, prefix)
    try:
        if kestrel:
            with Kestrel(dsn) as app:
                app.migrate()
        yield dsn
    finally:
        drop_database(admin, dsn)


def sqlalchemy_url(dsn: str) -> str:
    """The same database as a ``postgresql+psycopg://`` URL (what DBOS takes)."""
    p = conninfo_to_dict(dsn)
    user = p.get("user", "postgres")
    password = f":{p['password']}" if p.get("password") else ""
    host = p.get("host", "127.0.0.1")
    port = p.get("port", "5432")
    return f"postgresql+psycopg://{user}{password}@{host}:{port}/{p['dbname']}"


def server_version(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SHOW server_version").fetchone()[0]


def server_settings(dsn: str) -> dict[str, str]:
    """The settings that decide commit cost and dead-row cleanup, for the results file."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
            (
                [
                    "synchronous_commit",
                    "fsync",
                    "wal_sync_method",
                    "commit_delay",
                    "shared_buffers",
                    "max_connections",
                    "autovacuum",
                    "autovacuum_naptime",
                ],
            ),
        ).fetchall()
    return dict(rows)


@contextmanager
def sharing_the_server(drop: Callable[[str], None]) -> Iterator[None]:
    """Run benchmarks beside other work on the same server (the test suite's smoke runs):
    no CHECKPOINT before a timed run, and ``drop(dsn)`` instead of DROP DATABASE, which forces
    an immediate checkpoint in PostgreSQL 15. Every checkpoint writes out the whole server's
    dirty pages, and the next change of each page logs a full-page image: without the smoke
    runs' ~33 checkpoints, one every few seconds, the full suite took 8 % less time."""
    global _drop_later
    previous, _drop_later = _drop_later, drop
    try:
        yield
    finally:
        _drop_later = previous


def checkpoint(conn: psycopg.Connection) -> None:
    """Flush dirty buffers before a timed run, so one run does not pay for the last one's
    writes (the seeding's, or the last run's); skipped while ``sharing_the_server``, and
    silently where the user may not CHECKPOINT."""
    if _drop_later is not None:
        return
    try:
        conn.execute("CHECKPOINT")
    except psycopg.Error:
        pass


def rates(n: int, steps: int, elapsed: float) -> dict[str, float]:
    """The common throughput fields of a run's result."""
    return {
        "elapsed_s": round(elapsed, 3),
        "workflows_per_s": round(n / elapsed, 1),
        "steps_per_s": round(n * steps / elapsed, 1),
    }
