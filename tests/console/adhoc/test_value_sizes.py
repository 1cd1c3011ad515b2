"""Issue 44, round three: values and rows a query builds in the server's memory are bounded.

Measured on the server: the backend's private memory (RssAnon of pg_backend_pid(), read from
/proc by the test, the server being on this host) while the query runs. Before the fix the
guard let every shape below run: format('%999999999s') and replace() made ~1 GB values, the
aggregates and ARRAY() over generate_series took the backend past 1 GB, and the CTE chain
v || v || ... (60 terms of 1 MB) held 1.9 GB for a 60 MB result.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from kestrel_console.adhoc import QueryRefused, QueryTimeout, read_only, run_read_only
from kestrel_console.adhoc.backend_memory import MEMORY_LIMIT_MB, probe
from kestrel_console.adhoc.hard_limit import HARD_GRACE_S
from tests.cli.script import console


class Peak:
    """The highest RssAnon (kB) of one backend, sampled every 20 ms."""

    def __init__(self, pid: int) -> None:
        self.status = Path(f"/proc/{pid}/status")
        self.kb = 0
        self._stop = threading.Event()

    def sample(self) -> None:
        while not self._stop.wait(0.02):
            try:
                for line in self.status.read_text().splitlines():
                    if line.startswith("RssAnon:"):
                        self.kb = max(self.kb, int(line.split()[1]))
            except OSError:
                pass


@contextmanager
def measured(conn: psycopg.Connection) -> Iterator[Peak]:
    peak = Peak(conn.info.backend_pid)
    thread = threading.Thread(target=peak.sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        peak._stop.set()
        thread.join()


REFUSED = [
    "SELECT length(format('%999999999s', 'x'))",
    "SELECT length(format('%*s', 999999999, 'x'))",
    "SELECT length(replace(repeat('a', 1000), 'a', repeat('b', 1000000)))",
    "SELECT cardinality(ARRAY(SELECT g FROM generate_series(1, 1e8) g))",
    "SELECT cardinality(array_agg(g)) FROM generate_series(1, 100000000) g",
    "SELECT length(string_agg(g::text, ',')) FROM generate_series(1, 100000000) g",
    "SELECT length(jsonb_agg(g)::text) FROM generate_series(1, 100000000) g",
    "SELECT length(json_agg(g)::text) FROM generate_series(1, 100000000) g",
    "SELECT length(xmlagg(xmlelement(name a, g))::text) FROM generate_series(1, 100000000) g",
    "SELECT length(repeat('a', 1000000) || repeat('a', 1000000) || repeat('a', 1000000))",
    "SELECT sum(length(lpad('x', g * 1000))) FROM generate_series(1, 100000) g",
    "SELECT cardinality(array_fill('x'::text, ARRAY[100000000]))",
    "SELECT length(regexp_replace(repeat('a', 1000000), '', repeat('b', 100), 'g'))",
]


@pytest.mark.parametrize("query", REFUSED)
def test_builders_past_a_constant_factor_are_refused_before_the_server_builds_them(reader_dsn: str, query: str) -> None:
    with psycopg.connect(reader_dsn, autocommit=True) as conn, measured(conn) as peak:
        started = time.monotonic()
        with pytest.raises(QueryRefused) as refused:
            run_read_only(conn, query, timeout_ms=20_000)
        elapsed = time.monotonic() - started
    assert "\n" not in str(refused.value) and "server's memory" in str(refused.value)
    assert elapsed < 2 and peak.kb < 64 * 1024, (elapsed, peak.kb)


BOUNDED = [
    # each a constant factor of a value the rules bound: they run, in little memory
    "SELECT cardinality(string_to_array(repeat('a', 1000000), NULL))",
    "SELECT length(to_char(1, repeat('9', 1000000)))",
    "SELECT length(regexp_replace(repeat('a', 1000000), 'a', 'bbbbbbbbbb', 'g'))",
    "SELECT length(jsonb_build_array(repeat('a', 100000), repeat('b', 100000))::text)",
]


@pytest.mark.parametrize("query", BOUNDED)
def test_constant_factor_builders_run_in_bounded_memory(reader_dsn: str, query: str) -> None:
    with psycopg.connect(reader_dsn, autocommit=True) as conn, measured(conn) as peak:
        result = run_read_only(conn, query, timeout_ms=20_000)
    assert result.rows and peak.kb < MEMORY_LIMIT_MB * 1024, peak.kb


# 60 references to one CTE column of 1 MB: every intermediate of the chain stays in memory
# (1.9 GB before, for a 60 MB result). No rule of the text sees it: the backend's memory does.
CHAIN = "WITH t AS (SELECT repeat('x', 1000000) AS v) SELECT length(" + " || ".join(["v"] * 60) + ") FROM t"


def test_a_backend_past_the_memory_limit_is_terminated(reader_dsn: str) -> None:
    with psycopg.connect(reader_dsn, autocommit=True) as conn:
        assert probe(conn) is not None  # the test server runs on this host
        with measured(conn) as peak:
            started = time.monotonic()
            with pytest.raises(QueryTimeout) as stopped:
                run_read_only(conn, CHAIN, timeout_ms=60_000)
            elapsed = time.monotonic() - started
    message = str(stopped.value)
    assert "\n" not in message and f"past the console's limit of {MEMORY_LIMIT_MB:,} MB" in message, message
    assert "terminated its session" in message
    assert peak.kb < (MEMORY_LIMIT_MB + 200) * 1024, peak.kb
    assert elapsed < 30 and elapsed < 60 + HARD_GRACE_S


def test_the_memory_limit_is_one_line_from_the_cli(reader_dsn: str) -> None:
    done = console("sql", "--timeout", "60", CHAIN, env={"KESTREL_DSN": reader_dsn})
    assert done.returncode == 1 and done.stdout == "", done
    assert len(done.stderr.splitlines()) == 1 and f"limit of {MEMORY_LIMIT_MB:,} MB" in done.stderr, done.stderr


# -- temporary files: every login that runs ad-hoc SQL does it as kestrel_reader, with the limit


def test_a_materialised_generate_series_stops_at_the_temp_file_limit_for_every_login(
    reader_dsn: str, operator_dsn: str, dsn: str, monkeypatch
) -> None:
    monkeypatch.setattr(read_only, "READER_WORK_MEM", "64kB")
    monkeypatch.setattr(read_only, "READER_TEMP_FILE_LIMIT", "1MB")
    queries = [
        "SELECT count(*) FROM generate_series(1, 10000000)",  # a function scan keeps its rows
        "WITH t AS MATERIALIZED (SELECT g FROM generate_series(1, 10000000) g) SELECT count(*) FROM t",
        "SELECT g FROM generate_series(1, 10000000) g ORDER BY md5(g::text) OFFSET 10000000",
    ]
    for login, allow in ((reader_dsn, False), (operator_dsn, False), (dsn, True)):
        with psycopg.connect(login, autocommit=True) as conn:
            for query in queries:
                with pytest.raises(Exception) as failed:
                    run_read_only(conn, query, timeout_ms=60_000, allow_privileged=allow)
                assert "temp_file_limit" in str(failed.value), (login, query, failed.value)


def test_ad_hoc_sql_runs_without_parallel_workers(reader_dsn: str) -> None:
    """A parallel worker's memory is not its backend's: the memory watchdog would not see it."""
    with psycopg.connect(reader_dsn, autocommit=True) as conn:
        result = run_read_only(conn, "SHOW max_parallel_workers_per_gather")
    assert result.rows == [("0",)]
