"""EXPLAIN's rows are measured on the server too (review r44b: they were not).

Promise (docs/guarantees.md, "What is bounded": client memory per value and per result): each
row is measured on the server and a row larger than what is left of ``--max-bytes`` arrives as
NULLs, so no value larger than the limit ever reaches the client. ``_fetch`` sizes only a
SelectStmt; an ``EXPLAIN (VERBOSE)`` prints the planner's folded constants, and the immutable
``encode(x::bytea, 'hex')`` doubles at each level (the size rule leaves constant factors to the
watchdog), so a 32 MB plan line reaches the client whatever ``max_bytes``.
Now the console runs an EXPLAIN through the schema's ``explain_lines()`` (SECURITY INVOKER),
which sends a line larger than ``max_bytes`` as NULL. Reproduction before:
``kestrel-console sql --max-bytes 1000 "EXPLAIN (VERBOSE) SELECT
encode((encode((...repeat('x', 1000000)...)::bytea, 'hex'))::bytea, 'hex')"`` (5 levels):
the console process grows by about 90 MB (measured: peak RSS 47 MB -> 136 MB).
"""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest
from psycopg import sql

from kestrel_console.adhoc import run_read_only

LEVELS = 5
QUERY = "EXPLAIN (VERBOSE) SELECT " + "encode((" * LEVELS + "repeat('x', 1000000)" + ")::bytea, 'hex')" * LEVELS

SCRIPT = """
import json, resource, sys, psycopg
from kestrel_console.adhoc import run_read_only
conn = psycopg.connect(sys.argv[1], autocommit=True)
run_read_only(conn, "SELECT 1", schema=sys.argv[2], max_bytes=1000)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = run_read_only(conn, sys.argv[3], schema=sys.argv[2], max_bytes=1000)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"grew_kb": after - before, "cut": result.cut_at_bytes}))
"""


def test_an_explain_row_larger_than_max_bytes_does_not_reach_the_client(reader_dsn: str, app: object) -> None:
    schema = app.schema  # type: ignore[attr-defined]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, reader_dsn, schema, QUERY], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["cut"] == 1000
    assert measured["grew_kb"] < 20 * 1024, f"the client grew by {measured['grew_kb'] // 1024} MB under max_bytes=1000"


def test_an_explain_still_shows_its_plan_and_explain_lines_runs_nothing_else(reader_dsn: str, app: object) -> None:
    schema = app.schema  # type: ignore[attr-defined]
    with psycopg.connect(reader_dsn, autocommit=True) as conn:
        result = run_read_only(conn, "-- plan\nEXPLAIN (COSTS OFF) SELECT 1;", schema=schema)
        assert result.columns == ["QUERY PLAN"] and result.rows == [("Result",)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute(sql.SQL("SELECT * FROM {}.explain_lines('SELECT 1', 100)").format(sql.Identifier(schema)))
