"""The guard reads SQL as the server does: for every query of a hostile corpus and of a seeded
fuzzer, each literal and identifier in the guard's tree equals what the server returns for the
same SELECT, run as kestrel_reader in a read-only transaction that is rolled back.

Where the two could disagree is where a guard gets bypassed (issue 18: a hand-written lexer
missed string continuation, so it took code for a string). The guard may be stricter than the
server (refuse as unparsable what the server would run: comments inside the whitespace of a
string continuation, which libpg_query 15.1 does not join and PostgreSQL 15.20 does), never
laxer: a query the guard parsed must mean the same to the server.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from pglast import ast

from kestrel_console.adhoc.guard import QueryRefused, check_read_only
from tests.console.adhoc.hostile_sql import OPENERS, shape

FUZZ_CASES = 1000
FUZZ_SECONDS = 15.0  # bound on the fuzz loop; the seed keeps every run the same cases


@dataclass(frozen=True)
class Column:
    name: str
    literal: str | None  # the string constant's value, None when the target is code


def guard_view(query: str) -> list[Column] | None:
    """The output columns of the guard's tree (name, and value when a string literal); None
    when the guard cannot parse the query."""
    try:
        tree = check_read_only(query)
    except QueryRefused as refused:
        if refused.reason.startswith("cannot parse"):
            return None
        raise
    columns = []
    for target in tree.targetList:
        value = target.val
        literal = value.val.sval if isinstance(value, ast.A_Const) and isinstance(value.val, ast.String) else None
        if target.name is not None:
            name = target.name
        elif isinstance(value, ast.FuncCall):
            name = value.funcname[-1].sval
        else:
            name = "?column?"
        columns.append(Column(name, literal))
    return columns


@pytest.fixture
def as_reader(dsn: str) -> Iterator[Any]:
    """Run a query as kestrel_reader, read-only, rolled back: (column names, first row) or the
    error."""
    with psycopg.connect(dsn, autocommit=True) as conn:

        def run(query: str) -> tuple[list[str], tuple] | psycopg.Error:
            try:
                with conn.transaction(force_rollback=True):
                    conn.execute("SET TRANSACTION READ ONLY")
                    conn.execute("SET LOCAL ROLE kestrel_reader")
                    conn.execute("SET LOCAL statement_timeout = '2s'")
                    cur = conn.execute(query, prepare=False)
                    return [c.name for c in cur.description], cur.fetchone()
            except psycopg.Error as exc:
                return exc

        yield run


def agree(query: str, view: list[Column], server: tuple[list[str], tuple]) -> None:
    names, row = server
    assert names == [c.name for c in view], query
    for column, value in zip(view, row):
        if column.literal is not None:
            assert value == column.literal, (query, column)


@pytest.mark.parametrize("opener", OPENERS)
def test_the_issue_shapes_mean_to_the_guard_what_they_mean_to_the_server(opener: str, as_reader: Any) -> None:
    # The code the shape smuggles is harmless and visible: the guard must see it as a call.
    query = shape("lower($$SMUGGLED$$) AS smuggled", opener)
    view = guard_view(query)
    server = as_reader(query)
    if view is None:  # refused as unparsable: stricter than the server, never laxer
        return
    assert [c.name for c in view] == ["x", "smuggled"] and view[1].literal is None
    assert not isinstance(server, psycopg.Error), server
    agree(query, view, server)
    assert server[1][1] == "smuggled"


# -- the fuzzer ---------------------------------------------------------------------------------

PIECES = [
    "a",
    "b",
    " ",
    "\\",
    "\\\\",
    "\\'",
    "''",
    "'",
    "$",
    "$$",
    "--",
    "/*",
    "*/",
    "\n",
    "\r\n",
    "\t",
    ",",
    " AS ",
    "x",
    ";",
    '"',
    "\\x41",
    "\\101",
    "\\u0041",
    "lower($$q$$) AS smuggled",
    " --",
    "E",
    "U&",
]
SPACES = [" ", "\n", "  \n  ", "\r", "\n-- c\n", " /* c */ ", "/* /* nested */ */", "\t\n\t", ""]


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))


def _literal(rng: random.Random) -> str:
    kind = rng.randrange(8)
    if kind == 0:
        return f"'{_text(rng)}'"
    if kind == 1:
        return f"E'{_text(rng)}'"
    if kind == 2:  # a continuation: E or plain first segment, newline, more segments
        first = rng.choice(["E'", "e'", "'"]) + _text(rng) + "'"
        rest = "".join(rng.choice(SPACES) + "'" + _text(rng) + "'" for _ in range(rng.randint(1, 3)))
        return first + rest
    if kind == 3:
        tag = rng.choice(["", "t", "q1"])
        return f"${tag}${_text(rng)}${tag}$"
    if kind == 4:
        return f"U&'{_text(rng)}'" + rng.choice(["", " UESCAPE '!'"])
    if kind == 5:
        return rng.choice(["B'101'", "X'1F'", "42", "1.5e3", "$$$$"])
    if kind == 6:
        return "E'a'" + rng.choice(SPACES) + "'b\\' , 1 AS ' AS x, " + _text(rng) + " --'"
    return f"'{_text(rng)}'{rng.choice(SPACES)}'{_text(rng)}'"


def _identifier(rng: random.Random) -> str:
    return rng.choice(
        [f"c{rng.randrange(100)}", f'"{_text(rng).replace(chr(34), chr(34) * 2)}"', 'U&"\\0041b"', '"a""b"', "x"]
    )


def _query(rng: random.Random) -> str:
    items = [f"{_literal(rng)}{rng.choice(SPACES) or ' '}AS {_identifier(rng)}" for _ in range(rng.randint(1, 3))]
    return "SELECT " + ", ".join(items) + rng.choice(["", " --'", "\n", " /* ' */"])


def test_fuzzed_literals_and_identifiers_mean_the_same_to_guard_and_server(as_reader: Any) -> None:
    rng = random.Random(18)
    deadline = time.monotonic() + FUZZ_SECONDS
    both, guard_stricter, server_errors, cases = 0, 0, 0, 0
    while cases < FUZZ_CASES and time.monotonic() < deadline:
        cases += 1
        query = _query(rng)
        try:
            view = guard_view(query)
        except QueryRefused:
            continue  # parsed, and refused for what it names: nothing runs
        server = as_reader(query)
        if view is None:
            guard_stricter += not isinstance(server, psycopg.Error)
            continue
        if isinstance(server, psycopg.Error):
            server_errors += 1  # e.g. invalid escapes or trailing junk the 15.1 parser took
            continue
        agree(query, view, server)
        both += 1
    # The fuzzer must have produced enough queries both sides ran to mean something.
    assert both >= 300, (cases, both, guard_stricter, server_errors)
