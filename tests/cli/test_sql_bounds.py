"""Issue 44, findings 3 and 5 at the entry points: the guard cannot crash or stall the console,
and the console's own bounds hold.

Before the fix: `SELECT 1` followed by 40,000 ` + 1` (160 KB) killed the process inside the
parser (exit 139) in `sql`, `report` and the TUI; a 2 MB unparsable text took 38-47 s and
760 MB in the guard's token re-scan; a query that does not answer ran past its --timeout for as
long as the server (or the network) took; one huge value was read whole into the client.
"""

from __future__ import annotations

import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kestrel_console.adhoc import QueryRefused, QueryTimeout, run_read_only
from kestrel_console.adhoc.guard import MAX_QUERY_BYTES
from kestrel_console.adhoc.hard_limit import HARD_GRACE_S
from tests.cli.script import console

DEEP = "SELECT 1" + " + 1" * 40_000
TOO_BIG = f"one line: query of {len(DEEP):,} characters: at most {MAX_QUERY_BYTES:,} bytes are checked"


def test_a_40000_term_query_is_one_line_not_a_crash(reader_dsn: str, tmp_path: Path) -> None:
    done = console("sql", "-", stdin=DEEP, env={"KESTREL_DSN": reader_dsn}, subprocess=True)
    assert (done.returncode, done.stdout) == (1, ""), done.returncode
    assert done.stderr.startswith(f"error: refused: query of {len(DEEP):,} characters: at most 65,536 bytes")
    assert len(done.stderr.splitlines()) == 1
    (tmp_path / "deep.sql").write_text(f"-- description: deep\n{DEEP}\n")
    report = console("--queries", str(tmp_path), "report", "deep", env={"KESTREL_DSN": reader_dsn}, subprocess=True)
    assert (report.returncode, report.stdout) == (1, ""), report.returncode
    assert report.stderr.startswith("error: refused: query of ") and len(report.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    "query",
    [
        "SELECT 1" + " + 1" * 16_000,  # the deepest expression within the bound
        "SELECT " + "(" * 16_000 + "1" + ")" * 16_000,
        "SELECT " + "ARRAY[" * 5000 + "1" + "]" * 5000,
        "SELECT " + "-" * 60_000 + "1",
    ],
    ids=["plus", "parens", "arrays", "minus"],
)
def test_the_deepest_queries_within_the_bound_answer_in_one_line(reader_dsn: str, query: str) -> None:
    started = time.monotonic()
    done = console("sql", "--format", "csv", "-", stdin=query, env={"KESTREL_DSN": reader_dsn}, subprocess=True)
    # The server may refuse it (stack depth: its message and hint); nothing crashes.
    assert (done.returncode == 0 and done.stderr == "") or (
        done.returncode == 1 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    ), (done.returncode, done.stderr)
    assert time.monotonic() - started < 30


def test_a_2mb_unparsable_text_is_refused_at_once(reader_dsn: str) -> None:
    text = "SELECT " + "1 " * 1_000_000  # unparsable: the guard re-scanned its million tokens
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with psycopg.connect(reader_dsn, autocommit=True) as conn, pytest.raises(QueryRefused) as refused:
        run_read_only(conn, text)
    assert time.monotonic() - started < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KB
    assert refused.value.reason.startswith("query of 2,000,007 characters: at most 65,536 bytes")


def test_the_sql_screen_refuses_the_40000_term_query_in_one_line(reader_dsn: str) -> None:
    import asyncio

    from kestrel_console.tui.screens.sql import SqlScreen
    from tests.console.tui.helpers import SIZE, open_screen
    from tests.console.tui.helpers import console as tui_console
    from tests.console.tui.test_sql import run

    async def scenario() -> str:
        tui = tui_console(reader_dsn)
        async with tui.run_test(size=SIZE) as pilot:
            screen = await open_screen(pilot, "4", SqlScreen)
            return await run(pilot, screen, DEEP)

    message = asyncio.run(scenario())
    assert message.startswith(f"refused: query of {len(DEEP):,} characters") and "\n" not in message


# --- the console's own wall clock -----------------------------------------------------------------


class FreezingProxy:
    """A TCP proxy to the test server that, once it passes bytes holding ``MARKER`` (or
    ``freeze()`` is called), stops passing bytes on the connections it holds (new connections
    still pass): a server or network that no longer answers the console's query, nor delivers
    the end of its session."""

    MARKER = b"kestrel_freeze_here"

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.frozen = threading.Event()
        self.frozen_at = 0.0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.pairs: list[tuple[socket.socket, socket.socket, float]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            opened = time.monotonic()
            self.pairs.append((client, server, opened))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b, opened), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, opened: float) -> None:
        try:
            while data := source.recv(65536):
                if self.MARKER in data and not self.frozen.is_set():
                    self.freeze()
                while self.frozen.is_set() and opened < self.frozen_at:
                    time.sleep(0.05)  # held: never delivered
                sink.sendall(data)
        except OSError:
            pass

    def freeze(self) -> None:
        self.frozen_at = time.monotonic()
        self.frozen.set()

    def close(self) -> None:
        self.listener.close()
        for client, server, _ in self.pairs:
            client.close()
            server.close()


@pytest.fixture
def proxy(reader_dsn: str) -> Iterator[tuple[FreezingProxy, str]]:
    params = conninfo_to_dict(reader_dsn)
    running = FreezingProxy(params.get("host", "127.0.0.1"), int(params.get("port", 5432)))
    try:
        yield running, make_conninfo(reader_dsn, host="127.0.0.1", port=str(running.port))
    finally:
        running.close()


def test_a_query_that_never_answers_is_stopped_by_the_consoles_clock(proxy: tuple[FreezingProxy, str]) -> None:
    running, dsn = proxy
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert run_read_only(conn, "SELECT 1 AS one").rows == [(1,)]
        started = time.monotonic()
        with pytest.raises(QueryTimeout) as stopped:
            run_read_only(conn, "SELECT 2 AS kestrel_freeze_here", timeout_ms=1000)
        took = time.monotonic() - started
        assert conn.closed  # what was left of it is gone; the next query opens another
    assert took < 1 + HARD_GRACE_S + 2, took
    message = str(stopped.value)
    assert message.startswith("query stopped after ") and "so the console cancelled it, then terminated its" in message
    assert message.endswith("then closed the connection; narrow it or add a LIMIT") and "\n" not in message


def test_the_cli_returns_within_its_timeout_and_grace(proxy: tuple[FreezingProxy, str]) -> None:
    running, dsn = proxy
    started = time.monotonic()
    done = console("sql", "--timeout", "2", "SELECT 1 AS kestrel_freeze_here", env={"KESTREL_DSN": dsn})
    took = time.monotonic() - started
    assert (done.returncode, done.stdout) == (1, ""), done
    assert done.stderr.startswith("error: query stopped after ") and len(done.stderr.splitlines()) == 1, done.stderr
    assert took < 2 + HARD_GRACE_S + 3, took


# --- what one value may cost the client -------------------------------------------------------------


def test_a_huge_value_is_cut_on_the_server_not_read_whole(reader_dsn: str) -> None:
    # 64 MB in one value (hex of hex ... of 1 MB: constant factors the size rule leaves to the
    # watchdog): before, read whole into the client (libpq, then Python) and then cut.
    query = "SELECT 1 AS n, " + "encode((" * 6 + "repeat('x', 1000000)" + ")::bytea, 'hex')" * 6 + " AS big"
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    done = console(
        "sql", "--format", "json", "--max-bytes", "100000", "--timeout", "60", query, env={"KESTREL_DSN": reader_dsn}
    )
    grew_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr
    assert "result cut at 100000 bytes (0 rows)" in done.stderr
    assert grew_kb < 60_000, grew_kb
