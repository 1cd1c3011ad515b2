"""A private PostgreSQL server that Kestrel starts and stops itself.

Two users: ``kestrel-console demo`` (runs on one when no database is configured) and the
test suite (tests that stop, restart or crash the server must not touch the shared one).

Binaries: the PostgreSQL server installed on this machine (see :func:`find_bin_dir`), else
the copy bundled in the optional ``pgserver`` package (``pip install 'kestrel[embedded]'``).
Only pgserver's binaries are used; starting, stopping and crashing the server is done here
for both, because pgserver itself listens on a Unix socket only and cannot stop or crash it.

Safety: ``trust`` authentication, listening on 127.0.0.1 only, so any local user can connect
as ``postgres``. Fine for a demo or a test; not a place for real data.

Running as root: PostgreSQL refuses to run as root, so initdb, pg_ctl and the server run as
the ``postgres`` OS user (with pgserver's binaries and no such user: the ``pgserver`` user,
created if missing, as pgserver itself does). That user owns the data directory and must be
able to enter every directory above it; directories created here are made enterable, but
the permissions of existing ones are never loosened: an error says what to do instead.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from kestrel_core import KestrelError

try:
    import pwd
except ImportError:  # pragma: no cover - Windows
    pwd = None  # type: ignore[assignment]

BIN_ENV = "KESTREL_PG_BIN"
DEMO_DIR_ENV = "KESTREL_DEMO_DIR"
INSTALL_HINT = "pip install 'kestrel[embedded]'"
SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")
# Searched after pg_config, newest version first within each pattern.
SYSTEM_BIN_GLOBS = (
    "/usr/lib/postgresql/*/bin",  # Debian, Ubuntu
    "/usr/pgsql-*/bin",  # RHEL, Fedora (PGDG)
    "/opt/homebrew/opt/postgresql@*/bin",  # Homebrew, Apple silicon
    "/usr/local/opt/postgresql@*/bin",  # Homebrew, Intel
)
ROOT_DEMO_DIR = Path("/var/lib/kestrel/demo-pg")
HOST = "127.0.0.1"
SUPERUSER = "postgres"
SERVER_OS_USER = "postgres"
PGSERVER_OS_USER = "pgserver"
CONF_NAME = "kestrel_embedded.conf"
INCLUDE_LINE = f"include_if_exists = '{CONF_NAME}'"
LOG_NAME = "server.log"
LOG_TAIL_LINES = 25
STOP_MODES = ("smart", "fast", "immediate")
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes on Linux, including the final NUL
PORT_CLASH = "Address already in use"

DATABASE_EXISTS = "SELECT 1 FROM pg_database WHERE datname = %s"
CREATE_DATABASE = sql.SQL("CREATE DATABASE {}")

_SETTING_NAME = re.compile(r"^[a-z_][a-z0-9_.]*$")
_REMEMBERED_PORT = re.compile(r"^port = (\d+)\s*$", re.MULTILINE)
_SERVER_VERSION = re.compile(r"\(PostgreSQL\) (\d+)(?:\.(\d+))?")

Setting = str | int | float | bool


class EmbeddedPostgresError(KestrelError):
    """The private PostgreSQL server could not be found, created, started or stopped."""


def default_data_dir() -> Path:
    """Where ``kestrel-console demo`` keeps its server, so a second run finds its data again.

    ``$KESTREL_DEMO_DIR`` if set. As root: ``/var/lib/kestrel/demo-pg``, because the server
    runs as the ``postgres`` user, which cannot enter ``/root`` (and opening up ``/root`` is
    not ours to do). Otherwise ``$XDG_DATA_HOME/kestrel/demo-pg`` (default
    ``~/.local/share/kestrel/demo-pg``).
    """
    configured = os.environ.get(DEMO_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    if _running_as_root():
        return ROOT_DEMO_DIR
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "kestrel" / "demo-pg"


def find_bin_dir(explicit: Path | str | None = None) -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    Looked for in order: ``explicit``, ``$KESTREL_PG_BIN``, ``pg_config --bindir``, the newest
    version in the usual install locations (e.g. ``/usr/lib/postgresql/*/bin``), ``PATH``, and
    last the binaries bundled in the optional ``pgserver`` package. A directory named
    explicitly (argument or variable) must be right: it is an error, not skipped.
    """
    if explicit is not None:
        return _checked_bin_dir(Path(explicit), "bin_dir")
    configured = os.environ.get(BIN_ENV)
    if configured:
        return _checked_bin_dir(Path(configured), f"${BIN_ENV}")
    for candidate in _bin_dir_candidates():
        if not _missing_binaries(candidate):
            return candidate
    bundled = _pgserver_bin_dir()
    if bundled is not None:
        return bundled
    raise EmbeddedPostgresError(
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found on this machine: "
        f"install the PostgreSQL server (e.g. apt install postgresql), point ${BIN_ENV} at "
        f"its bin directory, or {INSTALL_HINT} for a bundled one"
    )


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
        self.settings = {name: _setting_value(name, value) for name, value in (settings or {}).items()}
        self._port = port
        self._log = log or (lambda _message: None)
        self._bundled = self.bin_dir == _pgserver_bin_dir()
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
                f"{_output(result)}\nFix the cause above, empty {self.data_dir} and try again."
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
        self._clear_zombie_locks()
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
                f"PostgreSQL in {self.data_dir} did not stop ({mode}):\n{_output(result)}\n"
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
        _signal(pid, signal.SIGSTOP)
        victims = [pid, *_child_pids(pid)]
        for victim in victims:
            _signal(victim, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while any(_process_alive(victim) for victim in victims):
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

    def create_database(self, name: str) -> str:
        """Create database ``name`` unless it exists; return its DSN. The server must be running."""
        if not self.is_running():
            raise EmbeddedPostgresError(
                f"PostgreSQL in {self.data_dir} is not running: call start() before create_database()"
            )
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            if conn.execute(DATABASE_EXISTS, (name,)).fetchone() is None:
                try:
                    conn.execute(CREATE_DATABASE.format(sql.Identifier(name)))
                except psycopg.errors.DuplicateDatabase:
                    pass  # created concurrently: same outcome
        return self.dsn_for(name)

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
        lines = [
            "# Written by Kestrel (kestrel_console.embedded_pg) at every start: edits are lost.",
            f"listen_addresses = '{HOST}'",
            f"port = {port}",
            f"unix_socket_directories = {_quote(socket_dir)}",
        ]
        if not self.durable:
            lines += ["fsync = off", "full_page_writes = off"]
        lines += [f"{name} = {value}" for name, value in self.settings.items()]
        self._write_owned(self.data_dir / CONF_NAME, "\n".join(lines) + "\n")
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
        if remembered is not None and _port_free(remembered):
            return remembered
        port = _free_port()
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
        if not _running_as_root():
            return None
        if self._account is None:
            self._account = _os_user(SERVER_OS_USER) or _os_user(PGSERVER_OS_USER)
            if self._account is None and self._bundled:
                self._log(f"creating OS user {PGSERVER_OS_USER!r} to run PostgreSQL (it refuses to run as root)")
                _create_os_user(PGSERVER_OS_USER)
                self._account = _os_user(PGSERVER_OS_USER)
            if self._account is None:
                raise EmbeddedPostgresError(
                    f"PostgreSQL refuses to run as root and there is no {SERVER_OS_USER!r} OS user to run it as: "
                    f"create one (useradd --system {SERVER_OS_USER}) or run as a normal user"
                )
            blocked = _blocked_directory(self.bin_dir, self._account)
            if blocked is not None:
                raise EmbeddedPostgresError(
                    f"the {self._account.pw_name!r} OS user cannot enter {blocked}, so it cannot run the "
                    f"PostgreSQL binaries in {self.bin_dir}: install them (or this virtualenv) elsewhere, "
                    f"allow it with chmod o+x {blocked}, or run as a normal user"
                )
        return self._account

    def _prepare_data_dir(self) -> None:
        """Create the data directory, owned by the server's OS user and reachable by it."""
        account = self._server_account()
        if account is None:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            return
        self._refuse_unreachable(account, self.data_dir.parent)  # before creating anything
        for directory in [*reversed(self.data_dir.parents), self.data_dir]:
            if not directory.exists():
                directory.mkdir()
                directory.chmod(0o700 if directory == self.data_dir else 0o755)
        if self.data_dir.stat().st_uid != account.pw_uid:
            os.chown(self.data_dir, account.pw_uid, account.pw_gid)
            self.data_dir.chmod(0o700)
        self._refuse_unreachable(account, self.data_dir)

    def _refuse_unreachable(self, account: pwd.struct_passwd, path: Path) -> None:
        blocked = _blocked_directory(path, account)
        if blocked is not None:
            raise EmbeddedPostgresError(
                f"PostgreSQL runs as the {account.pw_name!r} OS user (it refuses to run as root), which "
                f"cannot enter {blocked} to reach {self.data_dir}: choose a data directory it can reach "
                f"(e.g. ${DEMO_DIR_ENV}={ROOT_DEMO_DIR}) or allow it with chmod o+x {blocked}"
            )

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
        as_user: dict[str, object] = {}
        account = self._server_account()
        if account is not None:
            env.update(HOME=account.pw_dir, USER=account.pw_name, LOGNAME=account.pw_name)
            as_user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        try:
            return subprocess.run(
                command,
                cwd=self.data_dir if self.data_dir.is_dir() else "/",
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                **as_user,  # type: ignore[arg-type]
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
        return _process_alive(pid) and _looks_like_postgres(pid)

    def _clear_zombie_locks(self) -> None:
        """Remove lock files left by a killed server whose pid is an unreaped zombie.

        PostgreSQL removes stale lock files itself, except when the old pid still exists:
        a killed postmaster that no init process reaps (as in some containers) stays a
        zombie, and the new server would refuse to start, believing the old one alive.
        """
        for lock in [self.data_dir / "postmaster.pid", *self.data_dir.glob(".s.PGSQL.*.lock")]:
            try:
                first = lock.read_text().split("\n", 1)[0].strip()
            except OSError:
                continue
            if not first.isdigit() or self._alive([first]):
                continue
            try:
                os.kill(int(first), 0)
            except ProcessLookupError:
                continue  # gone for good: the server cleans up after it itself
            except PermissionError:
                pass
            lock.unlink(missing_ok=True)

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
            f"pg_ctl said: {_output(result)}\n"
            f"last lines of {self.log_file}:\n{tail}\n"
            "Fix the cause above (a port in use: pass another port or free it) and start again."
        )


# -- helpers -----------------------------------------------------------------------------------


def _running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _missing_binaries(directory: Path) -> list[str]:
    return [name for name in SERVER_BINARIES if not os.access(directory / name, os.X_OK)]


def _checked_bin_dir(directory: Path, what: str) -> Path:
    missing = _missing_binaries(directory)
    if missing:
        raise EmbeddedPostgresError(
            f"{what} {directory} has no PostgreSQL server binaries (missing: {', '.join(missing)}): "
            "point it at the bin directory of a PostgreSQL server installation, the one holding "
            "pg_ctl (e.g. /usr/lib/postgresql/15/bin), or leave it unset to search this machine"
        )
    return directory.absolute()


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(number) for number in re.findall(r"\d+", str(path)))


def _bin_dir_candidates() -> Iterator[Path]:
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            result = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.SubprocessError):
            result = None
        if result is not None and result.returncode == 0 and result.stdout.strip():
            yield Path(result.stdout.strip())
    for pattern in SYSTEM_BIN_GLOBS:
        yield from sorted(map(Path, glob.glob(pattern)), key=_version_key, reverse=True)
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl:
        yield Path(pg_ctl).resolve().parent


def _pgserver_bin_dir() -> Path | None:
    """The binaries bundled in the ``pgserver`` package, found without importing it."""
    try:
        spec = importlib.util.find_spec("pgserver")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "pginstall" / "bin"
        if not _missing_binaries(candidate):
            return candidate.absolute()
    return None


def _os_user(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _create_os_user(name: str) -> None:
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    command = [useradd, "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name]
    try:
        result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        failure = _output(result) if result.returncode != 0 else ""
    except OSError as exc:
        failure = str(exc)
    if failure and _os_user(name) is None:
        raise EmbeddedPostgresError(
            f"could not create the OS user {name!r} to run PostgreSQL (it refuses to run as root): "
            f"{failure}\nCreate it yourself (useradd --system {name}) or run as a normal user."
        )


def _blocked_directory(path: Path, account: pwd.struct_passwd) -> Path | None:
    """The first existing directory above ``path`` (or itself) that ``account`` cannot enter."""
    groups = set(os.getgrouplist(account.pw_name, account.pw_gid))
    for directory in [*reversed(path.parents), path]:
        try:
            info = directory.stat()
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None
        if info.st_uid == account.pw_uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid in groups:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            return directory
    return None


def _process_alive(pid: int) -> bool:
    """Whether ``pid`` runs; an unreaped zombie counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return _proc_state(pid) not in ("Z", "X")


def _looks_like_postgres(pid: int) -> bool:
    """Guard against a recycled pid: is ``pid`` a PostgreSQL server process (when /proc says)?"""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"postgres" in command or b"postmaster" in command


def _proc_state(pid: int) -> str | None:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat_line.rpartition(")")[2].split()[0]


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _child_pids(parent: int) -> list[int]:
    """Live children of ``parent`` (Linux /proc; elsewhere none: they exit on their own)."""
    children = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 1 and fields[1] == str(parent) and fields[0] not in ("Z", "X"):
            children.append(int(entry.name))
    return children


def _port_free(port: int) -> bool:
    """Whether the server could listen on ``port`` (it sets SO_REUSEADDR too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    """A free port below the kernel's ephemeral range.

    A port from the ephemeral range (what binding port 0 gives) can be taken by any outgoing
    connection as its local port while the server is down, say between a crash and its
    restart; the server would then have to move, and whatever points at it (a PgBouncer, a
    worker's DSN) would lose it. Ports below that range are never handed out that way.
    """
    low = _ephemeral_low()
    for port in random.sample(range(max(1024, low - 12000), low), 200):
        if _port_free(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _ephemeral_low() -> int:
    """First port of the range the kernel gives outgoing connections (Linux), else 32768."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _setting_value(name: str, value: Setting) -> str:
    """Render one server setting for the config file (names checked, strings quoted)."""
    if not _SETTING_NAME.match(name):
        raise ValueError(f"invalid PostgreSQL setting name {name!r}: use lower-case letters, digits, _ and .")
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float):
        return str(value)
    return _quote(str(value))


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return "\n".join(part.strip() for part in (result.stderr, result.stdout) if part and part.strip()) or (
        f"(no output, exit status {result.returncode})"
    )
