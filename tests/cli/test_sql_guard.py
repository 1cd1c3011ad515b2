"""`kestrel-console sql` as a user meets the guard: the installed script, run as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

SCRIPT = Path(sys.executable).parent / "kestrel-console"


def sql(dsn: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KESTREL_DSN": dsn}
    env.pop("KESTREL_QUERIES", None)
    return subprocess.run([str(SCRIPT), "sql", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def victim(dsn: str):
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


def test_an_attribute_call_is_refused_with_the_function_named(dsn: str, victim: psycopg.Connection,
                                                              tmp_path: Path) -> None:
    pid = victim.info.backend_pid
    done = sql(dsn, f"SELECT 1 FROM workflow_executions e RIGHT JOIN (SELECT 1) s ON true "
                    f"WHERE ({pid}).pg_terminate_backend", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: refused: function pg_terminate_backend: "), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert victim.execute("SELECT 1").fetchone() == (1,)

    text = sql(dsn, "SELECT ts_rewrite('a'::tsquery, 'SELECT pg_sleep(0)')", cwd=tmp_path)
    assert (text.returncode, text.stderr.strip()) == (1, "error: refused: function ts_rewrite: runs SQL given as text")


def test_the_superuser_note_and_the_byte_cut_go_to_stderr_and_json_stays_clean(dsn: str, tmp_path: Path) -> None:
    done = sql(dsn, "--format", "json", "--max-bytes", "3000",
               "SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 10) g", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [row["g"] for row in json.loads(done.stdout)] == [1, 2]
    notes = done.stderr.splitlines()
    assert notes[0].startswith("note: login ") and " is a superuser: queries run as kestrel_reader" in notes[0]
    assert notes[1] == "result cut at 3000 bytes (2 rows): narrow the query or raise --max-bytes"


@pytest.mark.parametrize(("args", "message"), [
    (["--timeout", "inf"], "error: --timeout inf: it must be a finite number"),
    (["--max-bytes", "0"], "--max-bytes"),
])
def test_bad_limits_are_bad_usage(dsn: str, tmp_path: Path, args: list[str], message: str) -> None:
    done = sql(dsn, *args, "SELECT 1", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert message in done.stderr and "Traceback" not in done.stderr
