"""Issue 44: a fuzz test of the whole ad-hoc SQL path, built from PostgreSQL's grammar tokens.

Hypothesis builds queries from the grammar's pieces (keywords, clauses, expressions, calls of
allowed and forbidden functions, attribute notation, casts, operators, string literals of
every kind: E'', U&'', dollar quotes, continuations across newlines, comments) and characters
that are 0x5C or another ASCII byte in some client encoding (``¥``, ``表``, ``ソ``...), and runs
each through ``run_read_only`` as a login of the reader role, in several client encodings
(SJIS and BIG5 with ``backslash_quote=on``, EUC_JP, LATIN1, UTF8). The database holds an
admin's helpers in the Kestrel schema (a SECURITY DEFINER function that kills sessions, an
operator and a view that do too). For every query the guard accepts, whatever Postgres then
answers:

- the plan (EXPLAIN VERBOSE as a superuser, on another connection) calls only allowlisted
  pg_catalog functions: every ``name(`` in its expressions is on the allowlist;
- the session holds no lock, no advisory lock, no prepared statement or cursor, runs as its
  login with the settings and client encoding it had; no replication slot exists;
- the victim session the helpers would kill is alive.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.conninfo import make_conninfo

from kestrel_console.adhoc import QueryFailed, QueryRefused, QueryTimeout, run_read_only
from kestrel_console.adhoc.allowlist import allowed_names
from tests.conftest import KeptSessions
from tests.console.adhoc.session_killers import session_killers

# An admin's helpers: the concatenation kills the victim inside its expression.
FUZZ_CONCAT = """LANGUAGE sql SECURITY DEFINER AS $$ SELECT a || b || pg_terminate_backend(
        (SELECT pid FROM pg_stat_activity WHERE application_name = 'kt-fuzz-victim' LIMIT 1))::text $$"""

# Characters that Python's codec of some client encoding turns into bytes holding ASCII (0x5C
# mostly), and others from several scripts.
CHARS = ["¥", "表", "ソ", "能", "功", "許", "\u00a5", "₩", "é", "Ж", "ß", "€", "\u203e", "a", "\\", "'", '"', "$"]
ENCODINGS = [
    ("UTF8", ""),
    ("SJIS", "-c backslash_quote=on"),
    ("BIG5", "-c backslash_quote=on"),
    ("GBK", "-c backslash_quote=on"),
    ("EUC_JP", ""),
    ("LATIN1", ""),
]
FUNCTIONS_OK = ["lower", "upper", "length", "coalesce", "md5", "now", "abs", "jsonb_typeof", "left", "repeat"]
FUNCTIONS_BAD = [
    "pg_terminate_backend",
    "pg_advisory_lock",
    "set_config",
    "nextval",
    "pg_read_file",
    "txid_current",
    "kill_session",
    "fuzz_concat",
    "pg_create_logical_replication_slot",
    "query_to_xml",
    "lo_import",
    "dblink",
]
COLUMNS = ["id", "status", "workflow_name", "input", "pid", "e.id", "e.status", "x"]
RELATIONS = ["workflow_executions e", "workers", "session_killer", "kestrel.session_killer", "pg_stat_activity"]


def quoted(text: str) -> st.SearchStrategy[str]:
    return st.sampled_from(
        [f"'{text}'", f"E'{text}'", f"$${text}$$", f"U&'{text}'", f"E'{text}'\n'{text}'", f"'{text}'\n'{text}'"]
    )


text_atom = st.text(st.sampled_from(CHARS), min_size=0, max_size=4).flatmap(quoted)
literal = st.one_of(st.integers(-5, 5).map(str), text_atom, st.sampled_from(["NULL", "true", "1.5", "'{}'::jsonb"]))


def expressions() -> st.SearchStrategy[str]:
    base = st.one_of(literal, st.sampled_from(COLUMNS))
    return st.recursive(
        base,
        lambda inner: st.one_of(
            st.tuples(st.sampled_from(FUNCTIONS_OK + FUNCTIONS_BAD), st.lists(inner, max_size=2)).map(
                lambda t: f"{t[0]}({', '.join(t[1])})"
            ),
            st.tuples(inner, st.sampled_from(FUNCTIONS_BAD + ["length", "status"])).map(lambda t: f"({t[0]}).{t[1]}"),
            st.tuples(inner, st.sampled_from(["+", "||", "=", "<", "->>", "~~", "-", "*"]), inner).map(" ".join),
            st.tuples(inner, st.sampled_from(["text", "int", "jsonb", "regclass", "name"])).map(
                lambda t: f"({t[0]})::{t[1]}"
            ),
            inner.map(lambda e: f"CASE WHEN {e} IS NULL THEN 1 ELSE 2 END"),
            inner.map(lambda e: f"(SELECT {e})"),
        ),
        max_leaves=6,
    )


# Noise the lexer cares about, dropped between the pieces of a query.
NOISE = ["", "", "", " ", "\n", " -- c\n", " /* c */ ", "\\", "'", " ; ", "$$", "E'", "¥'", "表' ", ",", "("]


@st.composite
def queries(draw: st.DrawFn) -> str:
    """A SELECT of the grammar's pieces with noise between them; or the shapes the red team
    found, with the pieces varied: the encoding desync (a character ending in 0x5C before a
    quote), attribute notation over pg_stat_activity's pids."""
    shape = draw(st.integers(0, 5))
    if shape == 0:
        char, code = draw(st.sampled_from(CHARS)), draw(expressions())
        return f"SELECT E'{char}' AS a, ' , {code} AS c --' AS b"
    if shape == 1:
        name = draw(st.sampled_from(FUNCTIONS_BAD + FUNCTIONS_OK))
        return f"SELECT (pid).{name} AS c0 FROM pg_stat_activity WHERE application_name = 'kt-fuzz-victim'"
    exprs = draw(st.lists(expressions(), min_size=1, max_size=3))
    pieces = ["SELECT", ", ".join(f"{e} AS c{i}" for i, e in enumerate(exprs))]
    if draw(st.booleans()):
        pieces += ["FROM", draw(st.sampled_from(RELATIONS))]
    if draw(st.booleans()):
        pieces += ["WHERE", draw(expressions())]
    pieces += draw(st.sampled_from([[], ["LIMIT 3"], ["ORDER BY 1"], ["FOR UPDATE"], ["UNION ALL SELECT 1"]]))
    noisy = [p + draw(st.sampled_from(NOISE)) for p in pieces]
    prefix = draw(st.sampled_from(["", "", "EXPLAIN ", "WITH w AS (SELECT 1) ", "/* x */ "]))
    return prefix + " ".join(noisy)


CALLS = re.compile(r"([A-Za-z_][A-Za-z0-9_$]*(?:\.[A-Za-z_][A-Za-z0-9_$]*)?)\(")
# Words of a deparsed plan followed by "(" that are syntax, not calls.
NOT_CALLS = frozenset(
    {"and", "or", "not", "in", "any", "all", "array", "row", "case", "subplan", "hashed", "exists", "values"}
)
PLAN_KEYS = (
    "Output",
    "Filter",
    "Join Filter",
    "Hash Cond",
    "Index Cond",
    "One-Time Filter",
    "Function Call",
    "Sort Key",
)


def plan_calls(plan: object) -> set[str]:
    found: set[str] = set()
    if isinstance(plan, dict):
        for key, value in plan.items():
            if key in PLAN_KEYS:
                for text in value if isinstance(value, list) else [value]:
                    found.update(m.lower() for m in CALLS.findall(re.sub(r"'(?:[^']|'')*'", "''", str(text))))
            else:
                found |= plan_calls(value)
    elif isinstance(plan, list):
        for item in plan:
            found |= plan_calls(item)
    return {name for name in found if name.split(".")[-1] not in NOT_CALLS}


@pytest.fixture
def world(dsn: str, reader_dsn: str, sessions: KeptSessions) -> Iterator[dict[str, object]]:
    with session_killers(dsn, "kt-fuzz-victim", "fuzz_concat", FUZZ_CONCAT):
        conns = {
            name: psycopg.connect(make_conninfo(reader_dsn, client_encoding=name, options=options), autocommit=True)
            for name, options in ENCODINGS
        }
        try:
            yield {
                "conns": conns,
                "observer": sessions.session(dsn, "observer"),
                "victim": sessions.session(dsn, "victim", options="-c application_name=kt-fuzz-victim"),
                "explainer": sessions.session(dsn, "explainer", options="-c search_path=pg_catalog,kestrel,pg_temp"),
            }
        finally:
            for conn in conns.values():
                conn.close()


STATE = """
SELECT current_user::text, current_setting('search_path'), current_setting('work_mem'),
       current_setting('client_encoding'), current_setting('statement_timeout'),
       (SELECT count(*) FROM pg_prepared_statements WHERE name NOT LIKE '\\_pg3\\_%%'),
       (SELECT count(*) FROM pg_cursors WHERE name <> '')
"""


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(query=queries(), encoding=st.sampled_from([name for name, _ in ENCODINGS]))
def test_what_the_guard_accepts_calls_only_allowlisted_functions_and_leaves_nothing(
    world: dict[str, object], query: str, encoding: str
) -> None:
    conn = world["conns"][encoding]  # type: ignore[index]
    observer: psycopg.Connection = world["observer"]  # type: ignore[assignment]
    victim: psycopg.Connection = world["victim"]  # type: ignore[assignment]
    explainer: psycopg.Connection = world["explainer"]  # type: ignore[assignment]
    if conn.closed:
        pytest.fail(f"the {encoding} session was closed by an earlier query")
    before = conn.execute(STATE).fetchone()
    try:
        run_read_only(conn, query, timeout_ms=5000)
    except QueryRefused:
        return
    except (QueryFailed, QueryTimeout):
        pass  # the guard let it through; Postgres refused or failed it: the checks below hold too
    except UnicodeEncodeError:
        pytest.fail(f"a traceback for {query!r} in {encoding}")
    # Only allowlisted functions in the plan of what ran (the text, as UTF8 now pinned sends it).
    if not query.lstrip().upper().startswith("EXPLAIN"):
        try:
            with explainer.transaction(force_rollback=True):
                explainer.execute("SET TRANSACTION READ ONLY")
                (plan,) = explainer.execute(f"EXPLAIN (VERBOSE, FORMAT JSON) {query}").fetchone()  # type: ignore[misc]
        except psycopg.Error:
            plan = []
        calls = plan_calls(plan if not isinstance(plan, str) else json.loads(plan))
        allowed = allowed_names()
        assert {c for c in calls if c.removeprefix("pg_catalog.") not in allowed} == set(), (query, calls)
    after = conn.execute(STATE).fetchone()
    assert after == before, (query, before, after)
    pid = conn.info.backend_pid
    assert observer.execute("SELECT count(*) FROM pg_locks WHERE pid = %s", (pid,)).fetchone() == (0,), query
    assert observer.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,), query
    assert victim.execute("SELECT 1").fetchone() == (1,), query
