"""In CI a PgBouncer that cannot start fails the PgBouncer tests; elsewhere they skip (issue 9)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST = "tests/core/test_pgbouncer.py::test_the_bouncer_pools_by_transaction"


def run_without_psql(ci: str | None) -> subprocess.CompletedProcess[str]:
    """Run one PgBouncer test where psql cannot be found (so the bouncer cannot be used)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "KESTREL_PGBOUNCER_DSN")}
    env["PATH"] = str(Path(sys.executable).parent)  # no psql, no bash
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", TEST, "-n", "0", "-q", "-p", "no:cacheprovider", "-rs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_a_missing_bouncer_is_a_failure(ci: str) -> None:
    done = run_without_psql(ci)
    assert done.returncode == 1, done.stdout
    assert "1 error" in done.stdout and "skipped" not in done.stdout, done.stdout
    assert "PgBouncer must run in CI" in done.stdout


def test_outside_ci_it_skips_saying_why() -> None:
    done = run_without_psql(None)
    assert done.returncode == 0, done.stdout
    assert "1 skipped" in done.stdout and "psql is not installed" in done.stdout, done.stdout


def test_ci_routes_the_engine_tests_through_the_bouncer() -> None:
    """.ci/run exports the bouncer's DSN; in CI its absence means the engine tests ran direct only."""
    if os.environ.get("CI", "").strip().lower() in ("", "0", "false", "no"):
        pytest.skip("not CI")
    assert os.environ.get("KESTREL_PGBOUNCER_DSN"), "CI is set but KESTREL_PGBOUNCER_DSN is not: run .ci/run"
