"""Processes and ports: is a pid a live server, its children, a free port to listen on."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

HOST = "127.0.0.1"


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs; an unreaped zombie counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return proc_state(pid) not in ("Z", "X")


def looks_like_postgres(pid: int) -> bool:
    """Guard against a recycled pid: is ``pid`` a PostgreSQL server process (when /proc says)?"""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"postgres" in command or b"postmaster" in command


def proc_state(pid: int) -> str | None:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat_line.rpartition(")")[2].split()[0]


def send_signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def child_pids(parent: int) -> list[int]:
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


def port_free(port: int) -> bool:
    """Whether the server could listen on ``port`` (it sets SO_REUSEADDR too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A free port below the kernel's ephemeral range.

    A port from the ephemeral range (what binding port 0 gives) can be taken by any outgoing
    connection as its local port while the server is down, say between a crash and its
    restart; the server would then have to move, and whatever points at it (a PgBouncer, a
    worker's DSN) would lose it. Ports below that range are never handed out that way.
    """
    low = ephemeral_low()
    for port in random.sample(range(max(1024, low - 12000), low), 200):
        if port_free(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def ephemeral_low() -> int:
    """First port of the range the kernel gives outgoing connections (Linux), else 32768."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def clear_zombie_locks(data_dir: Path) -> None:
    """Remove lock files left by a killed server whose pid is an unreaped zombie.

    PostgreSQL removes stale lock files itself, except when the old pid still exists:
    a killed postmaster that no init process reaps (as in some containers) stays a
    zombie, and the new server would refuse to start, believing the old one alive.
    """
    for lock in [data_dir / "postmaster.pid", *data_dir.glob(".s.PGSQL.*.lock")]:
        try:
            first = lock.read_text().split("\n", 1)[0].strip()
        except OSError:
            continue
        if not first.isdigit() or (process_alive(int(first)) and looks_like_postgres(int(first))):
            continue
        try:
            os.kill(int(first), 0)
        except ProcessLookupError:
            continue  # gone for good: the server cleans up after it itself
        except PermissionError:
            pass
        lock.unlink(missing_ok=True)
