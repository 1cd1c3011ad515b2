"""The child's side of ``supervisor`` (this package): tell the supervisor "ready" or why it failed,
and never outlive it.

The supervisor passes each child the write end of a pipe (its number in ``$KESTREL_SUPERVISOR_FD``)
and its own pid (``$KESTREL_SUPERVISOR_PID``). The child calls ``adopt()`` once at startup, then
``ready()`` when it is serving, or ``failed(message)`` with the one-line reason it gives up: a
child that exits before "ready" did not start, and the supervisor does not restart such a child
forever. One line per message, written in one ``write`` (atomic on a pipe up to 4 KiB).

Dying with the supervisor, even when it is SIGKILLed: on Linux the kernel sends the child
SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``, set between fork and exec by
``die_with_parent``); elsewhere the adopted child watches its parent pid once a second.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

STATUS_FD = "KESTREL_SUPERVISOR_FD"
SUPERVISOR_PID = "KESTREL_SUPERVISOR_PID"
MAX_LINE = 1000  # characters of a failure message kept (at most 4 bytes each: one atomic pipe write)
_PR_SET_PDEATHSIG = 1

_fd: int | None = None


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl on Linux (looked up in the parent: nothing to load after fork), else None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # the C library the interpreter links
    except (OSError, AttributeError):
        return None


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen`` that makes the kernel SIGTERM the child when
    this process dies, or None where the kernel cannot (then ``adopt`` watches the parent)."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def adopt() -> bool:
    """Take the status channel a supervisor passed this process; True if there is one.

    Call once, early. The variables are removed from the environment, so a process this one
    starts (a step running a command) does not write to the channel or watch the supervisor.
    """
    global _fd
    value = os.environ.pop(STATUS_FD, None)
    supervisor = os.environ.pop(SUPERVISOR_PID, None)
    if value is None:
        return _fd is not None
    try:
        fd = int(value)
        os.set_inheritable(fd, False)
    except (ValueError, OSError):
        return False
    _fd = fd
    if _prctl() is None and supervisor is not None and supervisor.isdigit():
        threading.Thread(
            target=_watch_parent, args=(int(supervisor),), name="kestrel-supervisor-watch", daemon=True
        ).start()
    return True


def ready() -> None:
    """Tell the supervisor this child is serving (a later exit is a crash, not a failed start)."""
    _send("ready")


def failed(message: str) -> bool:
    """Tell the supervisor why this child gives up; True if it was told (it prints the reason in
    its own error or log line, so the child need not print it too)."""
    return _send("failed " + " ".join(message.split())[:MAX_LINE])


def _send(line: str) -> bool:
    global _fd
    if _fd is None:
        return False
    try:
        os.write(_fd, (line + "\n").encode("utf-8", "replace"))
        return True
    except OSError:  # the supervisor is gone: nobody to tell
        _fd = None
        return False


def _watch_parent(supervisor: int) -> None:
    """Where the kernel cannot signal us: SIGTERM ourselves once the supervisor is gone."""
    while True:
        time.sleep(1.0)
        if os.getppid() != supervisor:
            os.kill(os.getpid(), signal.SIGTERM)
            return
