"""A private pg_auto_failover formation for the failover test: a monitor and two data nodes,
each a ``pg_autoctl run`` supervising its own PostgreSQL, all under one temporary directory,
on loopback and private ports.

PostgreSQL refuses to run as root: as root, every ``pg_autoctl`` runs as the ``postgres`` OS
user (runuser), which owns the directory. pg_autoctl keeps its configuration and state under
``$XDG_CONFIG_HOME`` / ``$XDG_DATA_HOME`` and puts the sockets in ``$PG_REGRESS_SOCK_DIR``:
all three point inside the directory, so nothing is left in the postgres user's home or in
/var/run/postgresql.

The monitor's failure detection is tightened from its production defaults (a node is declared
unhealthy after 20 s, then the monitor waits 30 s for the old primary to demote itself) to
about two seconds: the primary is killed outright here, so no old primary can still take writes
(in production ``primary_demote_timeout`` must stay above the keepers'
``network_partition_timeout``: that is what keeps a partitioned primary from writing on).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kestrel_console.embedded_pg.account import SERVER_OS_USER, os_user, running_as_root
from kestrel_console.embedded_pg.binaries import find_bin_dir
from kestrel_console.embedded_pg.process import free_port
from tests.waiting import T, wait_for

# Detection and promotion in about two seconds (see the module docstring); the defaults are
# 5000, 5000, 2000, 2, 20000, 30000, 10000.
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.node_considered_unhealthy_timeout": "2000",
    "pgautofailover.primary_demote_timeout": "2000",
    "pgautofailover.startup_grace_period": "2000",
}
NODE_STATES = """
SELECT nodename, reportedstate, goalstate FROM pgautofailover.node WHERE formationid = 'default' ORDER BY nodeid
"""
WRITABLE = ("primary", "wait_primary", "single")
# Every node: reached by the others at 127.0.0.1, trusted there (pg_hba), no TLS (loopback).
LOOPBACK = ("--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl")


class AutoFailoverUnavailable(Exception):
    """pg_autoctl (Debian: postgresql-15-auto-failover) or the PostgreSQL binaries are missing."""


class AutoFailoverFormation:
    """A monitor and nodes ``node1`` (the first primary) and ``node2`` (its synchronous standby)."""

    def __init__(self) -> None:
        pg_autoctl = shutil.which("pg_autoctl")
        if pg_autoctl is None:
            raise AutoFailoverUnavailable(
                "pg_autoctl is not installed (Debian/Ubuntu: apt-get install postgresql-15-auto-failover)"
            )
        self.pg_autoctl = pg_autoctl
        self.bin_dir = find_bin_dir()
        self.account = os_user(SERVER_OS_USER) if running_as_root() else None
        if running_as_root() and self.account is None:
            raise AutoFailoverUnavailable(f"running as root and there is no {SERVER_OS_USER!r} OS user to run it as")
        self.base = Path(tempfile.mkdtemp(prefix="kestrel-paf-"))
        self.base.chmod(0o755)
        for sub in ("sock", "xdg"):
            (self.base / sub).mkdir()
        if self.account is not None:
            for path in (self.base, self.base / "sock", self.base / "xdg"):
                os.chown(path, self.account.pw_uid, self.account.pw_gid)
        self.ports = {"monitor": free_port(), "node1": free_port(), "node2": free_port()}
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    # -- running pg_autoctl -------------------------------------------------------------------

    def _command(self, *args: str) -> list[str]:
        env = [
            f"PATH={self.bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
            f"XDG_CONFIG_HOME={self.base / 'xdg' / 'config'}",
            f"XDG_DATA_HOME={self.base / 'xdg' / 'data'}",
            f"XDG_RUNTIME_DIR={self.base / 'xdg' / 'run'}",
            f"PG_REGRESS_SOCK_DIR={self.base / 'sock'}",
            f"PGHOST={self.base / 'sock'}",  # where pg_autoctl reaches its own PostgreSQL
            f"HOME={self.base}",
            "LC_ALL=C.UTF-8",  # initdb: UTF8 databases (the C locale would make them SQL_ASCII)
        ]
        as_user = ["runuser", "-u", self.account.pw_name, "--"] if self.account is not None else []
        return [*as_user, "env", "-i", *env, self.pg_autoctl, *args]

    def _ctl(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            self._command(*args), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_autoctl {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
        return done.stdout

    def _run(self, name: str, *args: str) -> None:
        """``pg_autoctl run`` (or ``args``) for ``name`` in a process group of its own (a kill
        takes it all)."""
        log = self.base / f"{name}.log"
        self.logs[name] = log
        with open(log, "a") as out:
            self.procs[name] = subprocess.Popen(
                self._command(*(args or ("run", "--pgdata", str(self.base / name)))),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    # -- the formation ------------------------------------------------------------------------

    def monitor_dsn(self) -> str:
        return make_conninfo(host="127.0.0.1", port=self.ports["monitor"], user="postgres", dbname="pg_auto_failover")

    def node_dsn(self, name: str, dbname: str = "postgres") -> str:
        return make_conninfo(host="127.0.0.1", port=self.ports[name], user="postgres", dbname=dbname)

    def start(self) -> None:
        """Monitor, then node1 (primary), then node2 (a base backup of it, then its standby);
        returns once node2 is a synchronous standby."""
        pgdata = str(self.base / "monitor")
        self._ctl("create", "monitor", "--pgdata", pgdata, "--pgport", str(self.ports["monitor"]), *LOOPBACK)
        self._ctl("config", "set", "--pgdata", pgdata, "postgresql.listen_addresses", "127.0.0.1")
        self._run("monitor")
        monitor = self.wait(lambda: self._try(self.monitor_dsn()), 60, "the monitor to accept connections")
        with psycopg.connect(monitor, autocommit=True) as conn:
            for name, value in MONITOR_SETTINGS.items():
                conn.execute(f"ALTER SYSTEM SET {name} = {int(value)}")
            conn.execute("SELECT pg_reload_conf()")
        monitor_uri = f"postgres://autoctl_node@127.0.0.1:{self.ports['monitor']}/pg_auto_failover?sslmode=disable"
        for name in ("node1", "node2"):
            # create and run in one: no stop and restart of its PostgreSQL in between
            self._run(
                name, "create", "postgres", "--pgdata", str(self.base / name), "--pgport", str(self.ports[name]),
                "--listen", "127.0.0.1", "--name", name, "--monitor", monitor_uri, *LOOPBACK, "--run",
            )  # fmt: skip
            self.wait(lambda: self.state().get(name, ("",))[0] in ("single", "primary", "secondary"), 90, name)
            if name == "node1":
                # node2's base backup starts with a spread checkpoint (7 s here with initdb's
                # buffers dirty): a fast one now leaves it nothing to write
                with psycopg.connect(self.node_dsn("node1"), autocommit=True) as conn:
                    conn.execute("CHECKPOINT")
        self.wait(lambda: self.state() == {"node1": ("primary",) * 2, "node2": ("secondary",) * 2}, 90, "sync")
        self.wait(self._standby_is_synchronous, 30, "node2 to be a synchronous standby")

    def _try(self, dsn: str) -> str | None:
        try:
            with psycopg.connect(dsn, connect_timeout=2):
                return dsn
        except psycopg.OperationalError:
            return None

    def _standby_is_synchronous(self) -> bool:
        """The primary waits for node2 on every commit: pg_auto_failover names it in
        ``synchronous_standby_names`` (``ANY 1 (pgautofailover_standby_2)``: with two nodes its
        default ``number_sync_standbys = 0`` still means one synchronous standby while it is
        healthy) and it streams as a quorum/sync standby."""
        with psycopg.connect(self.node_dsn("node1"), autocommit=True) as conn:
            names = conn.execute("SHOW synchronous_standby_names").fetchone()[0]
            commit = conn.execute("SHOW synchronous_commit").fetchone()[0]
            row = conn.execute("SELECT sync_state FROM pg_stat_replication").fetchone()
        return (
            "pgautofailover_standby_2" in names and commit == "on" and row is not None and row[0] in ("sync", "quorum")
        )

    def state(self) -> dict[str, tuple[str, str]]:
        """Each node's (reported state, goal state), as the monitor holds them."""
        try:
            with psycopg.connect(self.monitor_dsn(), connect_timeout=2) as conn:
                return {name: (reported, goal) for name, reported, goal in conn.execute(NODE_STATES)}
        except psycopg.OperationalError:
            return {}

    def uri(self) -> str:
        """What ``pg_autoctl show uri --formation default`` prints, with the login added (the
        URI names none: libpq would use the OS user's name)."""
        out = self._ctl("show", "uri", "--pgdata", str(self.base / "monitor"), "--formation", "default")
        uri = out.strip().splitlines()[-1].strip()
        params = conninfo_to_dict(uri)
        assert params.get("target_session_attrs") == "read-write", uri
        return make_conninfo(uri, user="postgres")

    def kill(self, name: str) -> None:
        """SIGKILL node ``name``'s whole process group: its pg_autoctl keeper, its PostgreSQL and
        every backend, as when its host dies (killing PostgreSQL alone, its keeper would
        restart it and stay primary)."""
        proc = self.procs.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def promoted(self, name: str) -> bool:
        reported, goal = self.state().get(name, ("", ""))
        return reported in WRITABLE and goal in WRITABLE

    def events(self) -> str:
        with psycopg.connect(self.monitor_dsn(), connect_timeout=2) as conn:
            rows = conn.execute(
                "SELECT eventtime::time(1), nodename, reportedstate, goalstate, description"
                " FROM pgautofailover.event ORDER BY eventid"
            ).fetchall()
        return "\n".join(" | ".join(str(c) for c in row) for row in rows)

    def destroy(self) -> None:
        """SIGTERM every pg_autoctl (it stops its PostgreSQL), SIGKILL what is left, remove all."""
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the group: PostgreSQL's own processes too
            except ProcessLookupError:
                pass
            proc.wait()
        self.procs.clear()
        shutil.rmtree(self.base, ignore_errors=True)

    @staticmethod
    def wait(check: Callable[[], T], timeout: float, what: str) -> T:
        return wait_for(check, timeout=timeout, interval=0.1, what=f"pg_auto_failover: {what}")
