"""The demo's database: the configured one, else a private PostgreSQL in the demo's data folder.

Starting, it says where the data is. A second demo on the same machine finds the first one's
server running and says so ("already running (pid N), attaching to it at ..."); the first one
stops the server when it exits. ``--fresh`` starts from empty: it drops and recreates the
demo's database (with a configured DSN, the demo's schema), and says so.

On its private server the demo connects as the superuser, on which the console refuses ad-hoc
SQL; ``reader_login`` makes the read-only login its SQL and Reports screens use instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from kestrel_console.embedded_pg import LocalCluster, default_data_dir
from kestrel_core import KestrelError
from kestrel_core.db import DEFAULT_READER_ROLE, connect, describe_target, statements_beside

SQL = statements_beside(__file__)

DEMO_DATABASE = "kestrel_demo"
# Beside the server's own files: the pid of the demo that started the server.
DEMO_PID_FILE = "kestrel_demo.pid"
DROP_SCHEMA = sql.SQL(SQL.drop_schema)
# The login the demo's ad-hoc SQL runs on (trust authentication on 127.0.0.1: no password).
DEMO_READER_LOGIN = "kestrel_demo_reader"
CREATE_LOGIN = sql.SQL(SQL.create_login)
GRANT_ROLE = sql.SQL(SQL.grant_role)


class DemoRefused(KestrelError):
    """The demo cannot do what it was asked (e.g. --fresh while another demo uses the data)."""


@dataclass(frozen=True)
class DemoDatabase:
    """Where the demo runs: its DSN, a description, and the private data folder (None: --dsn)."""

    dsn: str
    where: str
    data_dir: Path | None = None


@contextmanager
def demo_database(
    dsn: str | None,
    schema: str,
    fresh: bool,
    progress: Callable[[str], None],
    spinning: Callable[[str], AbstractContextManager[None]],
) -> Iterator[DemoDatabase]:
    """Yield the demo's database; a private server started here is stopped on the way out."""
    if dsn is not None:
        if fresh:
            drop_schema(dsn, schema)
            progress(f"--fresh: dropped schema {schema!r} in {describe_target(dsn)}; migrate recreates it empty")
        yield DemoDatabase(dsn, describe_target(dsn))
        return
    data_dir = default_data_dir()
    cluster_exists = (data_dir / "PG_VERSION").is_file()
    progress(
        f"reusing the private PostgreSQL in {data_dir} (the demo's data folder)"
        if cluster_exists
        else f"initialising a private PostgreSQL in {data_dir}, the demo's data folder (first run only)"
    )
    cluster = LocalCluster(data_dir, log=progress)
    started_here = not cluster.is_running()
    if not started_here:
        _say_attaching(cluster, fresh, progress)
    try:
        with spinning(f"starting the private PostgreSQL in {data_dir}"):
            cluster.start()
            if started_here:
                _pid_file(data_dir).write_text(f"{os.getpid()}\n")
            if fresh:
                cluster.drop_database(DEMO_DATABASE)
                progress(
                    f"--fresh: dropped database {DEMO_DATABASE!r} (every execution, approval and "
                    "worker of earlier runs) and created it empty"
                )
            demo_dsn = cluster.create_database(DEMO_DATABASE)
        yield DemoDatabase(demo_dsn, f"the private PostgreSQL in {data_dir}", data_dir)
    finally:
        if started_here:
            with spinning("stopping PostgreSQL"):
                cluster.stop()
            _pid_file(data_dir).unlink(missing_ok=True)


def reader_login(dsn: str, login: str = DEMO_READER_LOGIN, role: str = DEFAULT_READER_ROLE) -> str:
    """The DSN of a login that is a member of the reader role and nothing else, created if
    missing (``dsn`` is an admin's, after ``migrate`` made the role)."""
    ident = {"login": sql.Identifier(login), "role": sql.Identifier(role)}
    with connect(dsn, application_name="kestrel-console demo", connect_timeout=5, autocommit=True) as conn:
        try:
            if conn.execute(SQL.login_exists, (login,)).fetchone() is None:
                conn.execute(CREATE_LOGIN.format(**ident))
            else:
                conn.execute(GRANT_ROLE.format(**ident))
        except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
            pass  # another demo on this server made it meanwhile
    return make_conninfo(dsn, user=login)


def running_demo_pid(data_dir: Path) -> int | None:
    """The pid of the live demo that started the server in ``data_dir``, if any."""
    try:
        pid = int(_pid_file(data_dir).read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def drop_schema(dsn: str, schema: str) -> None:
    """Drop the demo's schema with everything in it (migrate recreates it)."""
    try:
        with connect(dsn, application_name="kestrel-console demo", connect_timeout=5, autocommit=True) as conn:
            conn.execute(DROP_SCHEMA.format(sql.Identifier(schema)))
    except psycopg.Error as exc:
        raise DemoRefused(f"--fresh could not drop schema {schema!r}: {str(exc).strip()}") from None


def _say_attaching(cluster: LocalCluster, fresh: bool, progress: Callable[[str], None]) -> None:
    other = running_demo_pid(cluster.data_dir)
    where = f"{cluster.data_dir} (port {cluster.port})"
    if other is not None and other != os.getpid():
        if fresh:
            raise DemoRefused(
                f"another demo is running on this data (pid {other}): --fresh would empty it under "
                f"that demo; stop it first (kill {other}), or run without --fresh"
            )
        progress(
            f"a demo is already running (pid {other}), attaching to it at {where}: "
            "this demo adds its own workers; the server stops when that demo exits"
        )
    else:
        progress(
            f"a PostgreSQL (pid {cluster.server_pid}) is already running at {where}: using it, and leaving it running"
        )


def _pid_file(data_dir: Path) -> Path:
    return data_dir / DEMO_PID_FILE
