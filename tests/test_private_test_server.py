"""The README's test command on a machine with no PostgreSQL running (issue 45): the suite starts
a private server for the run, says so in its header, and removes it at the end. Shown here with
$KESTREL_TEST_DSN=private, the same path a fresh machine takes when nothing answers at
127.0.0.1:5432 (by hand, in a network namespace where nothing listens:
``unshare -n sh -c 'ip link set lo up; .venv/bin/python -m pytest'``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_run_without_a_server_starts_its_own_and_removes_it() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KESTREL_", "PYTEST_XDIST"))}
    env["KESTREL_TEST_DSN"] = "private"
    before = set(Path(tempfile.gettempdir()).glob("kestrel-test-pg-*"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            "tests/core/test_enqueue.py::test_enqueue_returns_id_and_stores_input",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"PostgreSQL: a private server started for this run \(port \d+\)", done.stdout), done.stdout
    assert "1 passed" in done.stdout
    assert set(Path(tempfile.gettempdir()).glob("kestrel-test-pg-*")) <= before  # its data is gone
