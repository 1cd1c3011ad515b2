"""The memory of the server process running an ad-hoc query, where the console can see it.

PostgreSQL 15 has no per-session memory limit: ``work_mem`` bounds each sort and hash, not the
values an expression builds. The guard refuses the functions that build a value larger than
their arguments by more than a constant factor (``sizes``), but constant factors compose: a
chain ``v || v || ... || v`` over one CTE column of 1 MB kept every intermediate (60 terms:
1.9 GB for a 60 MB result), nested encoders double at each level, a join multiplies rows.
No rule of the text bounds all of that, so ``HardLimit`` also watches the backend's private
memory (``RssAnon`` in ``/proc/<pid>/status``: shared buffers are not counted) and terminates
the session past ``MEMORY_LIMIT_MB``; Postgres acts on it at once (0.06 to 0.4 s measured).

That needs the server on the console's host. The process is identified, not assumed: its
command line must be a Postgres backend's (``postgres: user db host(port) ...``) naming the
port of the console's own end of the connection (a TCP connection), or ``[local]`` with the
same user and database (a Unix socket). Elsewhere (another host, a container, ``hidepid``)
``probe`` returns None and only the guard's rules and the wall clock bound the query.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import psycopg

__all__ = ["MEMORY_LIMIT_MB", "BackendMemory", "probe"]

# A query's sorts and hashes take 16 MB each (work_mem, twice that for hashes); the caches of
# a session a few tens of MB. Past this the query is building values, not reading rows.
MEMORY_LIMIT_MB = 512
PROC = Path("/proc")


class BackendMemory:
    """Reads one backend's private resident memory, in kB."""

    def __init__(self, status: Path) -> None:
        self.status = status

    def rss_anon_kb(self) -> int | None:
        """The backend's RssAnon, or None once it is gone or unreadable."""
        try:
            text = self.status.read_text(encoding="ascii", errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
        return None


def probe(conn: psycopg.Connection) -> BackendMemory | None:
    """The memory of ``conn``'s backend when it runs on this host and is identified as this
    connection's, else None."""
    try:
        pid = conn.info.backend_pid
        title = (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        if not title.startswith("postgres:"):
            return None
        words = title.split()
        if _local_port(conn) is not None:
            if f"({_local_port(conn)})" not in title:
                return None
        elif "[local]" not in words or conn.info.user not in words or conn.info.dbname not in words:
            return None
        memory = BackendMemory(PROC / str(pid) / "status")
        return memory if memory.rss_anon_kb() is not None else None
    except (OSError, ValueError, psycopg.Error):
        return None


def _local_port(conn: psycopg.Connection) -> int | None:
    """The port of the console's end of a TCP connection; None on a Unix socket."""
    with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
        if sock.family == socket.AF_UNIX:
            return None
        port: int = sock.getsockname()[1]
        return port
