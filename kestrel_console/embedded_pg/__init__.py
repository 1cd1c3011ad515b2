"""A private PostgreSQL server that Kestrel starts and stops itself.

Two users: ``kestrel-console demo`` (runs on one when no database is configured) and the
test suite (tests that stop, restart or crash the server must not touch the shared one).

Binaries (:mod:`.binaries`): the PostgreSQL server installed on this machine (see
:func:`find_bin_dir`), else the copy bundled in the optional ``pgserver`` package
(``pip install 'kestrel[embedded]'``). Only pgserver's binaries are used; starting, stopping
and crashing the server is done here (:mod:`.cluster`, :mod:`.process`) for both, because
pgserver itself listens on a Unix socket only and cannot stop or crash it.

Safety: ``trust`` authentication, listening on 127.0.0.1 only, so any local user can connect
as ``postgres``. Fine for a demo or a test; not a place for real data.

Running as root (:mod:`.account`): PostgreSQL refuses to run as root, so initdb, pg_ctl and
the server run as the ``postgres`` OS user (with pgserver's binaries and no such user: the
``pgserver`` user, created if missing, as pgserver itself does). That user owns the data
directory and must be able to enter every directory above it; directories created here are
made enterable, but the permissions of existing ones are never loosened: an error says what
to do instead.
"""

from __future__ import annotations

from .account import DEMO_DIR_ENV, ROOT_DEMO_DIR, default_data_dir
from .binaries import BIN_ENV, INSTALL_HINT, find_bin_dir
from .cluster import HOST, SUPERUSER, LocalCluster
from .config import Setting
from .errors import EmbeddedPostgresError

__all__ = [
    "BIN_ENV",
    "DEMO_DIR_ENV",
    "HOST",
    "INSTALL_HINT",
    "ROOT_DEMO_DIR",
    "SUPERUSER",
    "EmbeddedPostgresError",
    "LocalCluster",
    "Setting",
    "default_data_dir",
    "find_bin_dir",
]
