"""The worker processes of a chaos run: start, SIGKILL, SIGSTOP/SIGCONT, replace, terminate."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class WorkerPool:
    """The worker processes: start, kill, stop/continue, and replace."""

    def __init__(self, env: dict[str, str], log_dir: Path, *, concurrency: int, lease_s: float) -> None:
        self.env, self.log_dir = env, log_dir
        self.concurrency, self.lease_s = concurrency, lease_s
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopped: set[str] = set()
        self._n = 0
        self._lock = threading.Lock()

    def start_one(self) -> str:
        with self._lock:
            self._n += 1
            wid = f"w{self._n}"
        out = open(self.log_dir / f"{wid}.log", "w")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.chaos.workload",
                "--worker-id",
                wid,
                "--concurrency",
                str(self.concurrency),
                "--lease",
                str(self.lease_s),
            ],
            cwd=REPO,
            env={**self.env, "KESTREL_CHAOS_PARENT": str(os.getpid())},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.close()
        with self._lock:
            self.procs[wid] = proc
        return wid

    def alive(self) -> list[str]:
        with self._lock:
            return [w for w, p in self.procs.items() if p.poll() is None]

    def exited(self) -> dict[str, int]:
        """Workers that exited by themselves (not killed by the chaos), with their exit codes."""
        with self._lock:
            return {w: p.returncode for w, p in self.procs.items() if p.poll() is not None}

    def kill(self, wid: str) -> None:
        with self._lock:
            proc = self.procs.pop(wid)
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
