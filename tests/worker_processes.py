"""Worker processes for tests that need several real workers: started as
``python -m kestrel_console worker`` beside this interpreter, stopped with SIGTERM (then SIGKILL
if one does not exit in time)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import psycopg

from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]


def start_worker_process(
    dsn: str, target: str, *args: str, out: IO[Any] | int = subprocess.PIPE, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """A worker for the app at ``target`` (``tests.core.x:app``) on ``dsn``; its output to ``out``.
    Pass ``"--processes", "1"`` for one worker whose pid and id are the ones given (the default
    is one process per core, under a supervisor)."""
    environment = dict(os.environ, KESTREL_DSN=dsn, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.Popen(
        [sys.executable, "-m", "kestrel_console", "worker", target, *args],
        env=environment,
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
        text=out is subprocess.PIPE,
    )


def stop_worker_processes(procs: Iterable[subprocess.Popen], timeout: float = 20) -> None:
    """SIGTERM every worker still running, wait for each, kill one that does not exit."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class NumberedProcesses:
    """Processes started each under a new id (``prefix`` and a count), the output of each to
    ``<id>.log`` in ``logs``: the chaos run's and the lifecycle model's worker pools."""

    def __init__(self, prefix: str, logs: Path) -> None:
        self.procs: dict[str, subprocess.Popen] = {}
        self._prefix, self._logs = prefix, logs
        self._n = 0
        self._lock = threading.Lock()

    def launch(self, command: Callable[[str], list[str]], env: dict[str, str]) -> str:
        """Start ``command(id)`` in the repository's root under a new id; return the id."""
        with self._lock:
            self._n += 1
            wid = f"{self._prefix}{self._n}"
        with open(self._logs / f"{wid}.log", "w") as out:
            proc = subprocess.Popen(command(wid), cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        with self._lock:
            self.procs[wid] = proc
        return wid

    def alive(self) -> list[str]:
        with self._lock:
            return [w for w, p in self.procs.items() if p.poll() is None]

    def forget(self, wid: str) -> subprocess.Popen:
        """Take ``wid`` out of the pool (to kill it)."""
        with self._lock:
            return self.procs.pop(wid)


def one_worker(
    dsn: str,
    target: str,
    log: Path,
    worker_id: str | None = None,
    *,
    lease: float,
    concurrency: int,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """One worker process (no supervisor), named ``worker_id`` when given, its output in ``log``."""
    named = ("--worker-id", worker_id) if worker_id else ()
    with log.open("w") as out:
        args = ("--processes", "1", "--lease", str(lease), "--concurrency", str(concurrency), *named)
        return start_worker_process(dsn, target, *args, out=out, env=env)


@contextmanager
def registered_worker(
    dsn: str, db: psycopg.Connection, target: str, log: Path, *, lease: float, concurrency: int
) -> Iterator[subprocess.Popen]:
    """Worker ``frozen`` of ``target``, once it has registered; killed after (resumed first if
    the test stopped it with SIGSTOP)."""
    proc = one_worker(dsn, target, log, "frozen", lease=lease, concurrency=concurrency)
    try:
        wait_for(
            lambda: (
                db.execute("SELECT 1 FROM kestrel.workers WHERE worker_id = 'frozen' AND stopped_at IS NULL").fetchone()
                or proc.poll() is not None
            ),
            timeout=30,
            what="the worker to register",
        )
        assert proc.poll() is None, log.read_text()
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait(timeout=10)


def worker_main(
    app: Any,
    description: str | None,
    *,
    concurrency: int,
    lease: float,
    poll: float,
    grace: float,
    prepare: Callable[[], None] = lambda: None,
) -> None:
    """A test app's worker process (``python -m tests.x.app --worker-id W``): options
    --worker-id, --concurrency and --lease, logs at INFO, ``prepare()`` (a hook the test app
    installs), then a worker that polls and sweeps every ``poll`` seconds and gives ``grace``
    seconds at its stop."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--concurrency", type=int, default=concurrency)
    parser.add_argument("--lease", type=float, default=lease)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    prepare()
    app.run_worker(
        concurrency=args.concurrency,
        lease=timedelta(seconds=args.lease),
        worker_id=args.worker_id,
        poll_interval=poll,
        sweep_interval=poll,
        grace=timedelta(seconds=grace),
    )
