"""Running as root: PostgreSQL refuses to, so its programs run as an OS user that owns the data
directory and can enter every directory above it; and where the demo keeps its server."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

from .errors import EmbeddedPostgresError, program_output

try:
    import pwd
except ImportError:  # pragma: no cover - Windows
    pwd = None  # type: ignore[assignment]

DEMO_DIR_ENV = "KESTREL_DEMO_DIR"
ROOT_DEMO_DIR = Path("/var/lib/kestrel/demo-pg")
SERVER_OS_USER = "postgres"
PGSERVER_OS_USER = "pgserver"


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
    if running_as_root():
        return ROOT_DEMO_DIR
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "kestrel" / "demo-pg"


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def os_user(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def create_os_user(name: str) -> None:
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    command = [useradd, "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name]
    try:
        result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        failure = program_output(result) if result.returncode != 0 else ""
    except OSError as exc:
        failure = str(exc)
    if failure and os_user(name) is None:
        raise EmbeddedPostgresError(
            f"could not create the OS user {name!r} to run PostgreSQL (it refuses to run as root): "
            f"{failure}\nCreate it yourself (useradd --system {name}) or run as a normal user."
        )


def blocked_directory(path: Path, account: pwd.struct_passwd) -> Path | None:
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


def server_account(bin_dir: Path, *, bundled: bool, log: Callable[[str], None]) -> pwd.struct_passwd:
    """The OS user to run PostgreSQL as when we are root: ``postgres``, else ``pgserver``
    (created if missing when the binaries are pgserver's, as pgserver itself does)."""
    account = os_user(SERVER_OS_USER) or os_user(PGSERVER_OS_USER)
    if account is None and bundled:
        log(f"creating OS user {PGSERVER_OS_USER!r} to run PostgreSQL (it refuses to run as root)")
        create_os_user(PGSERVER_OS_USER)
        account = os_user(PGSERVER_OS_USER)
    if account is None:
        raise EmbeddedPostgresError(
            f"PostgreSQL refuses to run as root and there is no {SERVER_OS_USER!r} OS user to run it as: "
            f"create one (useradd --system {SERVER_OS_USER}) or run as a normal user"
        )
    blocked = blocked_directory(bin_dir, account)
    if blocked is not None:
        raise EmbeddedPostgresError(
            f"the {account.pw_name!r} OS user cannot enter {blocked}, so it cannot run the "
            f"PostgreSQL binaries in {bin_dir}: install them (or this virtualenv) elsewhere, "
            f"allow it with chmod o+x {blocked}, or run as a normal user"
        )
    return account


def prepare_data_dir(data_dir: Path, account: pwd.struct_passwd | None) -> None:
    """Create ``data_dir``; as root, owned by ``account`` and reachable by it (the permissions
    of existing directories above it are never loosened: an error says what to do)."""
    if account is None:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return
    _refuse_unreachable(account, data_dir.parent, data_dir)  # before creating anything
    for directory in [*reversed(data_dir.parents), data_dir]:
        if not directory.exists():
            directory.mkdir()
            directory.chmod(0o700 if directory == data_dir else 0o755)
    if data_dir.stat().st_uid != account.pw_uid:
        os.chown(data_dir, account.pw_uid, account.pw_gid)
        data_dir.chmod(0o700)
    _refuse_unreachable(account, data_dir, data_dir)


def _refuse_unreachable(account: pwd.struct_passwd, path: Path, data_dir: Path) -> None:
    blocked = blocked_directory(path, account)
    if blocked is not None:
        raise EmbeddedPostgresError(
            f"PostgreSQL runs as the {account.pw_name!r} OS user (it refuses to run as root), which "
            f"cannot enter {blocked} to reach {data_dir}: choose a data directory it can reach "
            f"(e.g. ${DEMO_DIR_ENV}={ROOT_DEMO_DIR}) or allow it with chmod o+x {blocked}"
        )
