"""A second `demo` on the same machine finds the first one's server and says so: "already
running (pid N), attaching to it at ..."; it refuses --fresh (that would empty the data under
the first demo); the first demo's server keeps running when the second one exits."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.waiting import wait_for

from .script import SCRIPT, environment, run_demo


def wait_for_dsn(log: Path, proc: subprocess.Popen, timeout: float = 90) -> str:
    """The DSN the demo running as ``proc`` printed into ``log`` (fails at once if it exits)."""

    def dsn() -> str | None:
        for line in log.read_text().splitlines():
            if line.startswith("DSN: "):
                return line[len("DSN: ") :]
        if proc.poll() is not None:
            pytest.fail(f"the first demo exited ({proc.returncode}) and printed no DSN:\n{log.read_text()}")
        return None

    try:
        return wait_for(dsn, timeout, 0.2, "the first demo to print its DSN")
    except AssertionError as exc:
        pytest.fail(f"{exc}:\n{log.read_text()}")


def test_a_second_demo_says_it_attaches_and_refuses_fresh(demo_dir: Path, tmp_path: Path) -> None:
    env = environment({"KESTREL_DEMO_DIR": str(demo_dir), "COLUMNS": "400", "PYTHONUNBUFFERED": "1"})
    log = tmp_path / "first.out"
    with log.open("w") as out:
        first = subprocess.Popen(
            [str(SCRIPT), "demo", "--no-tui", "--no-seed", "--rate", "0", "--duration", "60"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        dsn = wait_for_dsn(log, first)
        second = run_demo(demo_dir, "--no-seed", "--rate", "0", "--duration", "1", timeout=90)
        assert second.returncode == 0, second.stderr
        assert f"a demo is already running (pid {first.pid}), attaching to it at {demo_dir} " in second.stderr
        assert "the server stops when that demo exits" in second.stderr
        with psycopg.connect(dsn, connect_timeout=5) as conn:  # still up after the second one left
            assert conn.execute("SELECT 1").fetchone() == (1,)

        refused = run_demo(demo_dir, "--fresh", "--duration", "1", timeout=90)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert (
            f"error: another demo is running on this data (pid {first.pid}): --fresh would empty it" in refused.stderr
        )
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            assert conn.execute("SELECT count(*) FROM kestrel.workers").fetchone()[0] == 4  # 2 + 2, kept
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0, log.read_text()
