"""Finding the PostgreSQL server binaries: this machine's installation, else pgserver's copy."""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from .errors import EmbeddedPostgresError

BIN_ENV = "KESTREL_PG_BIN"
INSTALL_HINT = "pip install 'kestrel[embedded]'"
SERVER_BINARIES = ("initdb", "pg_ctl", "postgres")
# Searched after pg_config, newest version first within each pattern.
SYSTEM_BIN_GLOBS = (
    "/usr/lib/postgresql/*/bin",  # Debian, Ubuntu
    "/usr/pgsql-*/bin",  # RHEL, Fedora (PGDG)
    "/opt/homebrew/opt/postgresql@*/bin",  # Homebrew, Apple silicon
    "/usr/local/opt/postgresql@*/bin",  # Homebrew, Intel
)


def find_bin_dir(explicit: Path | str | None = None) -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    Looked for in order: ``explicit``, ``$KESTREL_PG_BIN``, ``pg_config --bindir``, the newest
    version in the usual install locations (e.g. ``/usr/lib/postgresql/*/bin``), ``PATH``, and
    last the binaries bundled in the optional ``pgserver`` package. A directory named
    explicitly (argument or variable) must be right: it is an error, not skipped.
    """
    if explicit is not None:
        return checked_bin_dir(Path(explicit), "bin_dir")
    configured = os.environ.get(BIN_ENV)
    if configured:
        return checked_bin_dir(Path(configured), f"${BIN_ENV}")
    for candidate in bin_dir_candidates():
        if not missing_binaries(candidate):
            return candidate
    bundled = pgserver_bin_dir()
    if bundled is not None:
        return bundled
    raise EmbeddedPostgresError(
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found on this machine: "
        f"install the PostgreSQL server (e.g. apt install postgresql), point ${BIN_ENV} at "
        f"its bin directory, or {INSTALL_HINT} for a bundled one"
    )


def missing_binaries(directory: Path) -> list[str]:
    return [name for name in SERVER_BINARIES if not os.access(directory / name, os.X_OK)]


def checked_bin_dir(directory: Path, what: str) -> Path:
    missing = missing_binaries(directory)
    if missing:
        raise EmbeddedPostgresError(
            f"{what} {directory} has no PostgreSQL server binaries (missing: {', '.join(missing)}): "
            "point it at the bin directory of a PostgreSQL server installation, the one holding "
            "pg_ctl (e.g. /usr/lib/postgresql/15/bin), or leave it unset to search this machine"
        )
    return directory.absolute()


def version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(number) for number in re.findall(r"\d+", str(path)))


def bin_dir_candidates() -> Iterator[Path]:
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
        yield from sorted(map(Path, glob.glob(pattern)), key=version_key, reverse=True)
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl:
        yield Path(pg_ctl).resolve().parent


def pgserver_bin_dir() -> Path | None:
    """The binaries bundled in the ``pgserver`` package, found without importing it."""
    try:
        spec = importlib.util.find_spec("pgserver")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / "pginstall" / "bin"
        if not missing_binaries(candidate):
            return candidate.absolute()
    return None
