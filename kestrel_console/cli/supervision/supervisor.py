"""A supervisor for N copies of one command (``kestrel-console worker --processes N``): one
Python process is one core, so N worker processes use N cores.

- starts N children, each in its own process group (a Ctrl-C in the terminal reaches only the
  supervisor, which forwards it once), each dying with the supervisor (``supervised``);
- SIGINT/SIGTERM: forwarded to every child, restarts stop; a second signal is forwarded too
  (a worker reads it as "stop waiting for running steps"); returns once every child exited;
- a child that dies is restarted after a backoff (0.5 s, doubling while it keeps dying within a
  minute of its start, at most 30 s), with a log line saying how it ended;
- a child that exits before it reported "ready" did not start. Before any child was ever ready
  that ends the supervisor at once (the app cannot start: bad database, broken module, exactly
  as with one process); later, ``max_failed_starts`` failed starts in a row do. Either way the
  other children are stopped and ``SupervisorGaveUp`` says which child and why.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kestrel_core import KestrelError
from kestrel_core.base import Backoff
from kestrel_core.engine import STOP_SIGNALS

from . import supervised

log = logging.getLogger("kestrel.supervisor")

RESTART = Backoff(0.5, cap=30.0)
STABLE_AFTER = 60.0  # seconds a child must live for its next restart to wait the shortest
MAX_FAILED_STARTS = 3  # failed starts in a row (once some child was ready) before giving up
TICK = 0.2  # seconds between looks at the children when nothing happens


class SupervisorGaveUp(KestrelError):
    """The children cannot start; every child was stopped."""


def default_processes() -> int:
    """One per core this process may run on (1 where children cannot be supervised)."""
    if os.name != "posix":
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def describe_status(code: int) -> str:
    """``1`` or ``signal SIGKILL``: how a child ended, for log lines and errors."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"status {code}"


def exit_status(code: int) -> int:
    """A child's return code as a shell would report it (killed by signal N: 128 + N)."""
    return 128 - code if code < 0 else code


@dataclass(eq=False)
class _Child:
    slot: int  # 1..N, stable across restarts
    proc: subprocess.Popen[bytes] | None = None
    status_fd: int | None = None  # read end of its status pipe
    pending: bytes = b""
    started: float = 0.0
    ready: bool = False
    reason: str | None = None  # what it said when it gave up
    quick_exits: int = 0  # exits in a row within STABLE_AFTER of a start
    restart_at: float | None = None
    final: int | None = None  # its return code once stopping


class Supervisor:
    """Runs ``command(slot)`` for slots 1..``processes`` and keeps them running; see the module."""

    def __init__(
        self,
        command: Callable[[int], Sequence[str]],
        processes: int,
        *,
        what: str = "worker process",
        env: Mapping[str, str] | None = None,
        restart: Backoff = RESTART,
        stable_after: float = STABLE_AFTER,
        max_failed_starts: int = MAX_FAILED_STARTS,
    ) -> None:
        if processes < 1:
            raise ValueError("processes must be at least 1")
        if os.name != "posix":
            raise KestrelError("more than one worker process needs a POSIX system: use --processes 1")
        self.command = command
        self.what = what
        self.env = dict(os.environ if env is None else env)
        self.restart = restart
        self.stable_after = stable_after
        self.max_failed_starts = max_failed_starts
        self.children = [_Child(slot) for slot in range(1, processes + 1)]
        self._selector = selectors.DefaultSelector()
        self._signals: list[int] = []  # received, not yet logged
        self._stopping = False
        self._gave_up: str | None = None
        self._any_ready = False
        self._failed_starts = 0

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        """Start the children and keep them running until SIGINT/SIGTERM, then wait for them.

        Returns 0 if every child stopped cleanly, else the first other exit status; raises
        ``SupervisorGaveUp`` when the children cannot start. Signal handling needs the main
        thread; elsewhere call ``stop()`` to end it.
        """
        previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                previous[sig] = signal.signal(sig, self._on_signal)
        try:
            log.info("event=supervisor_started pid=%s processes=%s", os.getpid(), len(self.children))
            for child in self.children:
                if not self._stopping:
                    self._spawn(child)
            while self._tick():
                pass
        except BaseException:
            self.stop(signal.SIGTERM)
            self._reap_all()
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._selector.close()
        if self._gave_up is not None:
            raise SupervisorGaveUp(self._gave_up)
        codes = [child.final for child in self.children if child.final]
        status = exit_status(codes[0]) if codes else 0
        log.info("event=supervisor_stopped status=%s", status)
        return status

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop restarting and send ``sig`` to every running child (each call sends it again)."""
        self._stopping = True
        for child in self.children:
            child.restart_at = None
            if child.proc is not None and child.proc.returncode is None:
                try:
                    os.kill(child.proc.pid, sig)
                except ProcessLookupError:
                    pass

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signals.append(signum)
        self.stop(signum)

    def _tick(self) -> bool:
        """One look at the children; False once stopping and every child has exited."""
        for key, _ in self._selector.select(timeout=TICK):
            self._read_status(key.data)
        while self._signals:
            sig = self._signals.pop(0)
            log.info("event=stopping signal=%s running=%s", signal.Signals(sig).name, len(self._running()))
        now = time.monotonic()
        for child in self._running():
            code = child.proc.poll() if child.proc is not None else None
            if code is not None:
                self._exited(child, code, now)
        if self._stopping:
            return bool(self._running())
        for child in self.children:
            if child.restart_at is not None and child.restart_at <= now:
                self._spawn(child)
        return True

    def _running(self) -> list[_Child]:
        return [c for c in self.children if c.proc is not None and c.proc.returncode is None]

    # -- one child ---------------------------------------------------------------------------

    def _spawn(self, child: _Child) -> None:
        read_end, write_end = os.pipe()
        env = dict(self.env, **{supervised.STATUS_FD: str(write_end), supervised.SUPERVISOR_PID: str(os.getpid())})
        try:
            child.proc = subprocess.Popen(
                list(self.command(child.slot)),
                env=env,
                pass_fds=(write_end,),
                stdin=subprocess.DEVNULL,
                process_group=0,
                preexec_fn=supervised.die_with_parent(),
            )
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        if self._stopping:  # a signal came while it was being started
            os.kill(child.proc.pid, signal.SIGTERM)
        os.set_blocking(read_end, False)
        self._selector.register(read_end, selectors.EVENT_READ, child)
        child.status_fd, child.pending = read_end, b""
        child.started, child.ready, child.reason, child.restart_at = time.monotonic(), False, None, None
        log.info("event=process_started process=%s pid=%s", self._label(child), child.proc.pid)

    def _read_status(self, child: _Child) -> None:
        """Read what the child said (non-blocking); close the pipe at its end."""
        if child.status_fd is None:
            return
        while True:
            try:
                chunk = os.read(child.status_fd, 4096)
            except BlockingIOError:
                break
            if not chunk:
                self._selector.unregister(child.status_fd)
                os.close(child.status_fd)
                child.status_fd = None
                break
            child.pending += chunk
        *lines, child.pending = child.pending.split(b"\n")
        for raw in lines:
            kind, _, text = raw.decode("utf-8", "replace").partition(" ")
            if kind == "ready" and not child.ready:
                child.ready, self._any_ready, self._failed_starts = True, True, 0
                log.info(
                    "event=process_ready process=%s pid=%s",
                    self._label(child),
                    child.proc.pid if child.proc is not None else None,
                )
            elif kind == "failed":
                child.reason = text

    def _exited(self, child: _Child, code: int, now: float) -> None:
        self._read_status(child)  # what it said before it exited is in the pipe
        if child.status_fd is not None:  # a process it started holds the pipe open
            self._selector.unregister(child.status_fd)
            os.close(child.status_fd)
            child.status_fd = None
        if self._stopping:
            child.final = code
            level = logging.INFO if code in (0, -signal.SIGTERM, -signal.SIGINT) else logging.WARNING
            log.log(
                level,
                "event=process_stopped process=%s pid=%s %s%s",
                self._label(child),
                child.proc.pid if child.proc else None,
                describe_status(code).replace(" ", "="),
                f" error={child.reason!r}" if child.reason and child.reason not in (self._gave_up or "") else "",
            )
            return
        if not child.ready and code != 0:
            self._failed_start(child, code)
            if self._gave_up is not None:
                return
        lived = now - child.started
        child.quick_exits = child.quick_exits + 1 if lived < self.stable_after else 1
        pause = self.restart.delay(child.quick_exits - 1)
        child.restart_at = now + pause
        log.warning(
            "event=process_exited process=%s pid=%s %s ready=%s lived_s=%.1f restart_in_s=%.1f%s",
            self._label(child),
            child.proc.pid if child.proc else None,
            describe_status(code).replace(" ", "="),
            child.ready,
            lived,
            pause,
            f" error={child.reason!r}" if child.reason else "",
        )

    def _failed_start(self, child: _Child, code: int) -> None:
        """A child exited before it was ready: give up if the app cannot start."""
        reason = child.reason or (
            f"it exited with {describe_status(code)} before it was ready (its output above says why)"
        )
        if not self._any_ready:
            self._give_up(f"{self.what} {self._label(child)} could not start: {reason}")
            return
        self._failed_starts += 1
        if self._failed_starts >= self.max_failed_starts:
            self._give_up(
                f"{self.what} {self._label(child)} could not start, {self._failed_starts} times in a row: {reason}"
            )

    def _give_up(self, message: str) -> None:
        """Remember why, and stop the other children: ``run`` raises once they exited."""
        self._gave_up = message
        self.stop(signal.SIGTERM)

    def _reap_all(self) -> None:
        """After an error in the loop: wait for the children told to stop (SIGKILL at 30 s)."""
        for child in self.children:
            if child.proc is not None and child.proc.returncode is None:
                try:
                    child.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    child.proc.kill()
                    child.proc.wait()

    def _label(self, child: _Child) -> str:
        return f"{child.slot}/{len(self.children)}"
