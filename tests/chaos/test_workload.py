"""A chaos worker does not outlive its run: a run killed outright (``pytest -x`` stopping xdist,
Ctrl-C) runs no teardown, and its workers went on polling for as long as the machine ran."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kestrel_console.embedded_pg.process import process_alive
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]

# A harness that starts one chaos worker (its log to argv[1]), waits until it runs (it waits for
# its database), prints its pid and exits without stopping it.
ORPHANING_HARNESS = """
import os, subprocess, sys, time
log = open(sys.argv[1], "w")
env = dict(os.environ, KESTREL_CHAOS_PARENT=str(os.getpid()))
worker = subprocess.Popen([sys.executable, "-m", "tests.chaos.workload", "--worker-id", "orphan"],
                          env=env, stdout=log, stderr=subprocess.STDOUT)
deadline = time.monotonic() + 20
while "waiting_for_database" not in open(sys.argv[1]).read() and time.monotonic() < deadline:
    time.sleep(0.05)
print(worker.pid)
"""


def test_a_worker_whose_harness_is_gone_stops(tmp_path: Path) -> None:
    # Nothing listens on port 1: the worker waits for its database (60 s), as it does while
    # the harness restarts its server.
    env = dict(os.environ, KESTREL_CHAOS_DSN="host=127.0.0.1 port=1 user=postgres dbname=none connect_timeout=1")
    log = tmp_path / "orphan.log"
    done = subprocess.run(
        [sys.executable, "-c", ORPHANING_HARNESS, str(log)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout)
    assert "waiting_for_database" in log.read_text()  # it ran when its harness left
    try:
        wait_for(lambda: not process_alive(pid), timeout=20, interval=0.1, what=f"orphaned chaos worker {pid} to stop")
    finally:
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)
