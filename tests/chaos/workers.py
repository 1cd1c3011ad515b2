"""The worker processes of a chaos run: start, SIGKILL, SIGSTOP/SIGCONT, replace, terminate."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.worker_processes import ROOT, NumberedProcesses

REPO = ROOT


class WorkerPool(NumberedProcesses):
    """The worker processes: start, kill, stop/continue, and replace."""

    def __init__(self, env: dict[str, str], log_dir: Path, *, concurrency: int, lease_s: float) -> None:
        super().__init__("w", log_dir)
        self.env, self.log_dir = env, log_dir
        self.concurrency, self.lease_s = concurrency, lease_s
        self.stopped: set[str] = set()

    def start_one(self) -> str:
        return self.launch(
            lambda wid: (
                [sys.executable, "-m", "tests.chaos.workload", "--worker-id", wid]
                + ["--concurrency", str(self.concurrency), "--lease", str(self.lease_s)]
            ),
            env={**self.env, "KESTREL_CHAOS_PARENT": str(os.getpid())},
        )

    def exited(self) -> dict[str, int]:
        """Workers that exited by themselves (not killed by the chaos), with their exit codes."""
        with self._lock:
            return {w: p.returncode for w, p in self.procs.items() if p.poll() is not None}

    def kill(self, wid: str) -> None:
        proc = self.forget(wid)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop(self, wid: str) -> None:
        self.stopped.add(wid)
        self.procs[wid].send_signal(signal.SIGSTOP)

    def cont(self, wid: str) -> None:
        proc = self.procs.get(wid)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
        self.stopped.discard(wid)

    def terminate_all(self, timeout: float = 20.0) -> None:
        """SIGCONT then SIGTERM every worker; SIGKILL any still there after ``timeout``."""
        with self._lock:
            procs = list(self.procs.values())
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
