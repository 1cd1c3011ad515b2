"""Worker processes for tests that need several real workers: started as
``python -m kestrel_console worker`` beside this interpreter, stopped with SIGTERM (then SIGKILL
if one does not exit in time)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

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
