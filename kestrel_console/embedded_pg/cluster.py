"""One private PostgreSQL server: a data directory plus the binaries that run it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from kestrel_core.db import statements_beside

from .account import prepare_data_dir, pwd, running_as_root, server_account
from .binaries import BIN_ENV, find_bin_dir, pgserver_bin_dir
from .config import CONF_NAME, INCLUDE_LINE, Setting, setting_value, settings_file
from .errors import EmbeddedPostgresError, program_output
from .process import (
    HOST,
    child_pids,
    clear_zombie_locks,
    free_port,
    looks_like_postgres,
    port_free,
    process_alive,
    send_signal,
)

SQL = statements_beside(__file__)

SUPERUSER = "postgres"
LOG_NAME = "server.log"
LOG_TAIL_LINES = 25
STOP_MODES = ("smart", "fast", "immediate")
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes on Linux, including the final NUL
PORT_CLASH = "Address already in use"

CREATE_DATABASE = sql.SQL(SQL.create_database)
DROP_DATABASE = sql.SQL(SQL.drop_database)

_REMEMBERED_PORT = re.compile(r"^port = (\d+)\s*$", re.MULTILINE)
_SERVER_VERSION = re.compile(r"\(PostgreSQL\) (\d+)(?:\.(\d+))?")


class LocalCluster:
    """One private PostgreSQL server: a data directory plus the binaries that run it.

    ``durable=False`` (tests) turns off fsync and full-page writes: fast, and still safe
    against :meth:`kill`, which loses no committed transaction since the OS keeps the
    written data; only an OS crash could corrupt it. ``synchronous_commit`` stays on in
    both modes: with fsync off it costs almost nothing, and turning it off would let a
    :meth:`kill` lose transactions the client saw committed, which crash tests must not see.

    ``settings`` adds server settings (name -> value) written to the cluster's config file.
    ``log`` receives one-line progress messages (e.g. ``rich.console.Console.print``).
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        port: int | None = None,
        bin_dir: Path | str | None = None,
        durable: bool = True,
        settings: Mapping[str, Setting] | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser().absolute()
        self.bin_dir = find_bin_dir(bin_dir)
        self.durable = durable
        self.settings = {name: setting_value(name, value) for name, value in (settings or {}).items()}
        self._port = port
        self._log = log or (lambda _message: None)
        self._bundled = self.bin_dir == pgserver_bin_dir()
        self._account: pwd.struct_passwd | None = None
        self._version: str | None = None
        self._started_here = False

    def __repr__(self) -> str:
        return f"LocalCluster({str(self.data_dir)!r}, port={self.port}, running={self.is_running()})"

    # -- where to connect ------------------------------------------------------------------

    @property
    def log_file(self) -> Path:
        """The server's log; start failures quote its last lines."""
        return self.data_dir / LOG_NAME

    @property
    def port(self) -> int | None:
        """The running server's port, else the one given or last used (None before the first init)."""
        running = self._postmaster_fields()
        if running is not None and len(running) > 3 and running[3].isdigit() and self._alive(running):
            return int(running[3])
        return self._port if self._port is not None else self._remembered_port()

    @property
    def dsn(self) -> str:
        """``host=127.0.0.1 port=... user=postgres dbname=postgres``."""
        return self.dsn_for(SUPERUSER)

    def dsn_for(self, dbname: str) -> str:
        """The DSN of database ``dbname`` on this server."""
        port = self.port
        if port is None:
            raise EmbeddedPostgresError(
                f"the PostgreSQL cluster in {self.data_dir} has no port yet: call init() or start() first"
            )
        return make_conninfo(host=HOST, port=str(port), user=SUPERUSER, dbname=dbname)

    @property
    def version(self) -> str:
        """Major version of the server binaries, e.g. ``"15"``."""
        if self._version is None:
            output = self._run([self._binary("postgres"), "--version"], timeout=30).stdout
            found = _SERVER_VERSION.search(output)
            if found is None:
                raise EmbeddedPostgresError(
                    f"{self._binary('postgres')} does not look like a PostgreSQL server "
                    f"(--version said {output.strip()!r}): point ${BIN_ENV} at a PostgreSQL bin directory"
                )
            major, minor = found.groups()
            self._version = major if int(major) >= 10 or minor is None else f"{major}.{minor}"
        return self._version

    # -- lifecycle ---------------------------------------------------------------------------

    def init(self) -> None:
        """Create the cluster (initdb) unless the data directory already holds one."""
        if (self.data_dir / "PG_VERSION").is_file():
            self._check_data_version()
            return
        self._prepare_data_dir()
        if any(self.data_dir.iterdir()):
            raise EmbeddedPostgresError(
                f"{self.data_dir} is not empty and holds no PostgreSQL cluster (no PG_VERSION): "
                "empty it or choose another directory"
            )
        self._log(f"creating a PostgreSQL {self.version} cluster in {self.data_dir}")
        command = [
            self._binary("initdb"),
            "--pgdata", str(self.data_dir),
            "--auth", "trust",
            "--username", SUPERUSER,
            "--encoding", "UTF8",
            "--locale", "C",
        ]  # fmt: skip
        if not self.durable:
            command.append("--no-sync")
        result = self._run(command, timeout=300)
        if result.returncode != 0:
            raise EmbeddedPostgresError(
                f"initdb could not create a PostgreSQL cluster in {self.data_dir}:\n"
                f"{program_output(result)}\nFix the cause above, empty {self.data_dir} and try again."
            )
        self._write_config(self._choose_port())

    def start(self, timeout: float = 30) -> None:
        """Start the server (creating the cluster first if needed) and wait until it accepts connections.

        A port picked here is remembered in the data directory and reused next time if it
        is free; a port given to the constructor is always used as is.
        """
        if self.is_running():
            self._log(f"PostgreSQL is already running in {self.data_dir} on {HOST}:{self.port}")
            return
        self.init()
        clear_zombie_locks(self.data_dir)
        for attempt in range(3):
            port = self._choose_port()
            self._write_config(port)
            log_offset = self._log_size()
            self._log(f"starting PostgreSQL {self.version} on {HOST}:{port} (data in {self.data_dir})")
            result = self._run(
                [
                    self._binary("pg_ctl"), "start",
                    "--pgdata", str(self.data_dir),
                    "--log", str(self.log_file),
                    "--wait", "--timeout", str(max(1, round(timeout))),
                ],
                timeout=timeout + 30,
            )  # fmt: skip
            if result.returncode == 0:
                return
            new_log = self._log_since(log_offset)
            clash = self._port is None and PORT_CLASH in new_log and not self.is_running()
            if clash and attempt < 2:
                continue  # someone took the port between our check and the server's bind
            raise self._start_failed(result, new_log, port, timeout)

    def stop(self, mode: str = "fast", timeout: float = 60) -> None:
        """Stop the server; does nothing if it is not running.

        ``fast`` disconnects clients and shuts down cleanly; ``immediate`` skips the shutdown
        checkpoint, so the next start runs crash recovery (``smart`` waits for clients to leave).
        """
        if mode not in STOP_MODES:
            raise ValueError(f"stop mode must be one of {', '.join(STOP_MODES)}, not {mode!r}")
        if not self.is_running():
            return
        self._log(f"stopping PostgreSQL in {self.data_dir} ({mode})")
        result = self._run(
            [
                self._binary("pg_ctl"), "stop",
                "--pgdata", str(self.data_dir),
                "--mode", mode,
                "--wait", "--timeout", str(max(1, round(timeout))),
            ],
            timeout=timeout + 30,
        )  # fmt: skip
        if result.returncode != 0 and self.is_running():
            raise EmbeddedPostgresError(
                f"PostgreSQL in {self.data_dir} did not stop ({mode}):\n{program_output(result)}\n"
                f"See {self.log_file}; stop(mode='immediate') or kill() force it down."
            )

    def restart(self, timeout: float = 30) -> None:
        """Stop the server cleanly (if running) and start it again."""
        self.stop("fast")
        self.start(timeout=timeout)

    def kill(self, timeout: float = 10) -> None:
        """Crash the server: SIGKILL the postmaster and its backends, as a power cut would.

        Returns once every server process is gone; the next :meth:`start` runs crash recovery.
        Does nothing if the server is not running.
        """
        fields = self._postmaster_fields()
        if fields is None or not self._alive(fields):
            return
        pid = int(fields[0])
        self._log(f"killing PostgreSQL in {self.data_dir} (SIGKILL to postmaster {pid} and its backends)")
        # Freeze the postmaster so it forks no more, then kill it with every child: a backend
        # left to notice its death by itself could keep shared memory attached for a while
        # and make the next start fail.
        send_signal(pid, signal.SIGSTOP)
        victims = [pid, *child_pids(pid)]
        for victim in victims:
            send_signal(victim, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while any(process_alive(victim) for victim in victims):
            if time.monotonic() > deadline:
                raise EmbeddedPostgresError(
                    f"PostgreSQL processes of {self.data_dir} survived SIGKILL for {timeout:g}s: "
                    f"look for them with: ps -f --ppid {pid}"
                )
            time.sleep(0.01)

    def destroy(self) -> None:
        """Stop the server at once (kill it if it will not stop) and delete the data directory."""
        try:
            self.stop("immediate", timeout=20)
        except EmbeddedPostgresError:
            self.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def is_running(self) -> bool:
        """Whether a server process owns this data directory right now."""
        fields = self._postmaster_fields()
        return fields is not None and self._alive(fields)

    @property
    def server_pid(self) -> int | None:
        """The running postmaster's pid, None when the server is not running."""
        fields = self._postmaster_fields()
        return int(fields[0]) if fields is not None and self._alive(fields) else None

    def drop_database(self, name: str) -> None:
        """Drop database ``name`` if it exists, disconnecting its sessions. The server must be running."""
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(DROP_DATABASE.format(sql.Identifier(name)))

    def create_database(self, name: str) -> str:
        """Create database ``name`` unless it exists; return its DSN. The server must be running."""
        if not self.is_running():
            raise EmbeddedPostgresError(
                f"PostgreSQL in {self.data_dir} is not running: call start() before create_database()"
            )
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            if conn.execute(SQL.database_exists, (name,)).fetchone() is None:
                try:
                    conn.execute(CREATE_DATABASE.format(sql.Identifier(name)))
                except psycopg.errors.DuplicateDatabase:
                    pass  # created concurrently: same outcome
        return self.dsn_for(name)

    # -- replication (failover tests) -------------------------------------------------------

    def standby(self, data_dir: Path | str) -> LocalCluster:
        """A streaming standby of this running server in ``data_dir`` (pg_basebackup with
        ``-R``), stopped: :meth:`start` it, and :meth:`promote` it when the primary is gone."""
        replica = LocalCluster(data_dir, bin_dir=self.bin_dir, durable=self.durable)
        replica.settings = dict(self.settings)
        replica._prepare_data_dir()
        command = [
            self._binary("pg_basebackup"),
            "--host", HOST, "--port", str(self.port), "--username", SUPERUSER,
            "--pgdata", str(replica.data_dir), "--write-recovery-conf", "--wal-method", "stream",
            "--checkpoint", "fast",  # the default (spread) waits out half a checkpoint: 30 s here
        ]  # fmt: skip
        result = self._run(command, timeout=300)
        if result.returncode != 0:
            raise EmbeddedPostgresError(f"pg_basebackup could not copy {self.data_dir}:\n{program_output(result)}")
        (replica.data_dir / CONF_NAME).unlink(missing_ok=True)  # the primary's port: choose another
        return replica

    def promote(self, timeout: float = 60) -> None:
        """Promote a standby to a primary and wait until it accepts writes."""
        result = self._run(
            [self._binary("pg_ctl"), "promote", "--pgdata", str(self.data_dir), "--wait",
             "--timeout", str(max(1, round(timeout)))],
            timeout=timeout + 30,
        )  # fmt: skip
        if result.returncode != 0:
            raise EmbeddedPostgresError(f"pg_ctl promote failed in {self.data_dir}:\n{program_output(result)}")

    def __enter__(self) -> LocalCluster:
        """Start the server (creating it if needed); leaving stops it only if it started here."""
        self._started_here = not self.is_running()
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._started_here:
            self._started_here = False
            self.stop()

    # -- configuration -----------------------------------------------------------------------

    def _write_config(self, port: int) -> None:
        """Write our settings file (port, addresses, durability) and include it from postgresql.conf."""
        socket_dir = str(self.data_dir)
        if len(os.path.join(socket_dir, f".s.PGSQL.{port}")) > MAX_SOCKET_PATH:
            self._log(f"{self.data_dir} is too long a path for a Unix socket: TCP only")
            socket_dir = ""
        self._write_owned(
            self.data_dir / CONF_NAME,
            settings_file(HOST, port, socket_dir, durable=self.durable, settings=self.settings),
        )
        main_conf = self.data_dir / "postgresql.conf"
        text = main_conf.read_text()
        if INCLUDE_LINE not in text.splitlines():
            self._write_owned(main_conf, text.rstrip("\n") + f"\n\n{INCLUDE_LINE}\n")

    def _remembered_port(self) -> int | None:
        try:
            found = _REMEMBERED_PORT.search((self.data_dir / CONF_NAME).read_text())
        except OSError:
            return None
        return int(found.group(1)) if found else None

    def _choose_port(self) -> int:
        if self._port is not None:
            return self._port
        remembered = self._remembered_port()
        if remembered is not None and port_free(remembered):
            return remembered
        port = free_port()
        if remembered is not None:
            self._log(f"port {remembered} is taken: PostgreSQL in {self.data_dir} moves to port {port}")
        return port

    def _check_data_version(self) -> None:
        data_version = (self.data_dir / "PG_VERSION").read_text().strip()
        if data_version != self.version:
            raise EmbeddedPostgresError(
                f"the cluster in {self.data_dir} was created by PostgreSQL {data_version} but the "
                f"binaries in {self.bin_dir} are PostgreSQL {self.version}: point ${BIN_ENV} at a "
                f"PostgreSQL {data_version} bin directory, or delete {self.data_dir} to start afresh"
            )

    # -- files and processes -----------------------------------------------------------------

    def _binary(self, name: str) -> str:
        return str(self.bin_dir / name)

    def _server_account(self) -> pwd.struct_passwd | None:
        """The OS user the server runs as when we are root (None: run as ourselves)."""
        if not running_as_root():
            return None
        if self._account is None:
            self._account = server_account(self.bin_dir, bundled=self._bundled, log=self._log)
        return self._account

    def _prepare_data_dir(self) -> None:
        """Create the data directory, owned by the server's OS user and reachable by it."""
        prepare_data_dir(self.data_dir, self._server_account())

    def _write_owned(self, path: Path, text: str) -> None:
        """Write a file in the data directory, owned by the server's OS user."""
        path.write_text(text)
        account = self._server_account()
        if account is not None:
            os.chown(path, account.pw_uid, account.pw_gid)

    def _run(self, command: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
        """Run a PostgreSQL program, as the server's OS user when we are root."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
        env["LC_ALL"] = "C"  # English messages, which the errors we raise quote
        user: int | None = None
        group: int | None = None
        extra_groups: list[int] | None = None
        account = self._server_account()
        if account is not None:
            env.update(HOME=account.pw_dir, USER=account.pw_name, LOGNAME=account.pw_name)
            user, group, extra_groups = account.pw_uid, account.pw_gid, []
        try:
            return subprocess.run(
                command,
                cwd=self.data_dir if self.data_dir.is_dir() else "/",
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                user=user,
                group=group,
                extra_groups=extra_groups,
            )
        except subprocess.TimeoutExpired as exc:
            raise EmbeddedPostgresError(
                f"{Path(command[0]).name} did not finish within {timeout:g}s (data in {self.data_dir}); "
                f"see {self.log_file}"
            ) from exc
        except OSError as exc:
            raise EmbeddedPostgresError(
                f"cannot run {command[0]}: {exc}: point ${BIN_ENV} at a working PostgreSQL bin directory"
            ) from exc

    def _postmaster_fields(self) -> list[str] | None:
        """Lines of postmaster.pid (pid, data dir, start time, port, ...), None if absent."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
        except OSError:
            return None
        return lines if lines and lines[0].strip().isdigit() else None

    @staticmethod
    def _alive(fields: list[str]) -> bool:
        pid = int(fields[0])
        return process_alive(pid) and looks_like_postgres(pid)

    def _log_size(self) -> int:
        try:
            return self.log_file.stat().st_size
        except OSError:
            return 0

    def _log_since(self, offset: int) -> str:
        try:
            with self.log_file.open("rb") as log:
                log.seek(offset)
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _start_failed(
        self, result: subprocess.CompletedProcess[str], new_log: str, port: int, timeout: float
    ) -> EmbeddedPostgresError:
        tail = "\n".join(new_log.splitlines()[-LOG_TAIL_LINES:]) or "(nothing logged)"
        still = " It may still be starting: stop() it before retrying." if self.is_running() else ""
        return EmbeddedPostgresError(
            f"PostgreSQL did not start on {HOST}:{port} within {timeout:g}s (data in {self.data_dir}).{still}\n"
            f"pg_ctl said: {program_output(result)}\n"
            f"last lines of {self.log_file}:\n{tail}\n"
            "Fix the cause above (a port in use: pass another port or free it) and start again."
        )
