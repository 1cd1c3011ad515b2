"""Worker processes for the benchmarks: start, wait until ready, measure RSS, stop or kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parent.parent

COUNT_WORKERS = "SELECT count(*) FROM kestrel.workers WHERE worker_id = ANY(%s) AND stopped_at IS NULL"


class Proc:
    """One child process running a ``python -m`` module, its output kept in a log file."""

    def __init__(self, module: str, args: Sequence[str], *, name: str) -> None:
        self.name = name
        self.log = Path(tempfile.mkstemp(prefix=f"bench-{name}-", suffix=".log")[1])
        self._terminated = False
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        with open(self.log, "wb") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", module, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=REPO,
                env=env,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def check_alive(self) -> None:
        if not self.alive():
            raise RuntimeError(f"{self.name} (pid {self.pid}) exited with {self.popen.returncode}:\n{self.tail()}")

    def wait_for_output(self, text: str, timeout: float = 60.0) -> None:
        """Block until the process printed ``text`` (e.g. a readiness line)."""
        deadline = time.monotonic() + timeout
        while text not in self.log.read_text(errors="replace"):
            self.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} did not print {text!r} within {timeout} s:\n{self.tail()}")
            time.sleep(0.05)

    def rss_mib(self) -> dict[str, float]:
        """Resident memory now and at its peak (VmRSS, VmHWM) in MiB."""
        out: dict[str, float] = {}
        with open(f"/proc/{self.pid}/status") as f:
            for text in f:
                key, _, value = text.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = round(int(value.split()[0]) / 1024.0, 1)
        return {"rss_mib": out.get("VmRSS", 0.0), "peak_rss_mib": out.get("VmHWM", 0.0)}

    def kill(self) -> None:
        """SIGKILL, no chance to clean up (the crash the recovery test simulates)."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def terminate(self) -> None:
        """SIGTERM (graceful), once: a second one tells a worker to stop waiting for running
        steps, and once its handler is gone it kills the process (a profile unwritten)."""
        if self.alive() and not self._terminated:
            self._terminated = True
            self.popen.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (graceful), then SIGKILL if it does not exit in time; removes the log."""
        if self.alive():
            self.terminate()
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        try:
            self.log.unlink()
        except OSError:
            pass


def kestrel_worker(
    dsn: str,
    *,
    worker_id: str,
    concurrency: int,
    lease: float = 30.0,
    listen: bool = True,
    poll_interval: float = 1.0,
    sweep_interval: float = 1.0,
    module: str = "bench.worker",
    profile: Path | None = None,
    prune_older_than: float | None = None,
    prune_every: float = 600.0,
    buckets: int | None = None,
) -> Proc:
    """Start ``python -m bench.worker`` (the bench.workloads app) on ``dsn``.

    ``module``: another module taking the same options (to try an engine change in a copy);
    ``profile``: run it under cProfile, its statistics written to this file when it stops;
    ``prune_older_than``: retention on (seconds), pruning every ``prune_every`` seconds;
    ``buckets``: serve a share of that many bucket groups.
    """
    args = [
        "--dsn",
        dsn,
        "--concurrency",
        str(concurrency),
        "--lease",
        str(lease),
        "--worker-id",
        worker_id,
        "--poll-interval",
        str(poll_interval),
        "--sweep-interval",
        str(sweep_interval),
    ]
    if not listen:
        args.append("--no-listen")
    if profile is not None:
        args += ["--profile", str(profile)]
    if prune_older_than is not None:
        args += ["--prune-older-than", str(prune_older_than), "--prune-every", str(prune_every)]
    if buckets is not None:
        args += ["--buckets", str(buckets)]
    return Proc(module, args, name=worker_id)


def wait_registered(dsn: str, procs: Sequence[Proc], worker_ids: Sequence[str], timeout: float = 60.0) -> None:
    """Block until every worker has its row in ``workers`` (it registered and is starting)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            for p in procs:
                p.check_alive()
            if conn.execute(COUNT_WORKERS, (list(worker_ids),)).fetchone()[0] == len(worker_ids):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers {list(worker_ids)} did not register within {timeout} s")
            time.sleep(0.05)


def stop_all(procs: Sequence[Proc]) -> None:
    """Stop every process: SIGTERM to all first, so they drain in parallel."""
    for p in procs:
        p.terminate()
    for p in procs:
        p.stop()
