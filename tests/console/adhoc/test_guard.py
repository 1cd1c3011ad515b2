"""Layer (a) of the read-only guard, on its own: what check_read_only accepts and refuses, and why.

These need no database; tests/console/adhoc/test_adhoc.py runs the hostile queries against Postgres.
"""

from __future__ import annotations

import pytest

from kestrel_console.adhoc.guard import QueryRefused, check_read_only
from kestrel_core import KestrelError
from tests.console.adhoc.hostile_sql import SHAPES


def refusal(query: str, **kwargs: bool) -> str:
    with pytest.raises(QueryRefused) as caught:
        check_read_only(query, **kwargs)
    return caught.value.reason


READS = [
    "SELECT * FROM workflow_executions WHERE status = 'error'",
    "select id, input->>'pod' from workflow_executions where input @> '{\"pod\": \"api-1\"}'",
    "WITH e AS (SELECT status FROM workflow_executions) SELECT status, count(*) FROM e GROUP BY 1",
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) SELECT * FROM n",
    "VALUES (1, 'a'), (2, 'b')",
    "TABLE workers",
    "(SELECT 1)",
    "SELECT 1 UNION SELECT 2 INTERSECT SELECT 2 EXCEPT SELECT 3",
    "EXPLAIN SELECT * FROM workflow_executions",
    "EXPLAIN ANALYZE SELECT count(*) FROM step_attempts",
    "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) WITH a AS (SELECT 1) SELECT * FROM a",
    "explain verbose select 1",
    "SHOW search_path",
    "show all",
    "SELECT workflow_name FROM workflow_executions WHERE workflow_name LIKE '%port%'",
    "SELECT pg_sleep(0.01)",
    "SELECT pg_catalog.pg_sleep_for('10 milliseconds')",
    "SELECT count(*) FILTER (WHERE status = 'error') OVER (PARTITION BY workflow_name) FROM workflow_executions",
    "SELECT now() - interval '1 hour', lower('A'), coalesce(NULL, 1), current_setting('search_path')",
    "SELECT 1;",
    "SELECT 1; ;  -- empty statements after the query do not count",
    # Dangerous-looking text inside strings, comments and identifiers is data, not code.
    "SELECT 'DELETE FROM workflow_executions; DROP TABLE workers' AS s",
    "SELECT $$pg_terminate_backend(1); DELETE FROM x$$ AS s, $tag$ $$ ; $tag$ AS t",
    "SELECT E'it\\'s; DELETE FROM x' AS s",
    "SELECT 1 -- ; DELETE FROM workflow_executions",
    "SELECT 1 /* outer /* nested; pg_terminate_backend(1) */ still comment; */",
    'SELECT 1 AS "pg_terminate_backend", 2 AS "update; delete"',
    "SELECT nextval_count, setval_at FROM (SELECT 1 AS nextval_count, 2 AS setval_at) s",
    "SELECT currval_x FROM (SELECT 1 AS currval_x) s",
]


@pytest.mark.parametrize("query", READS)
def test_reads_are_accepted(query: str) -> None:
    check_read_only(query)


REFUSALS = [
    ("", "empty query"),
    ("  ;  -- nothing\n", "empty query"),
    ("SELECT 1; DROP TABLE x", "2 statements: run one at a time"),
    ("SELECT 1 /* ; */; DELETE FROM x; SELECT 2", "3 statements: run one at a time"),
    ("DELETE FROM workflow_executions", "not a read: DELETE"),
    ("update workflow_executions set status = 'error'", "not a read: UPDATE"),
    ("WITH x AS (SELECT 1) INSERT INTO workers (worker_id) SELECT 'w' FROM x", "not a read: INSERT"),
    ("CREATE TABLE evil (a int)", "not a read: CREATE"),
    ("SET ROLE postgres", "not a read: SET"),
    ("RESET ALL", "not a read: RESET"),
    ("COPY workers TO PROGRAM 'id'", "not a read: COPY"),
    ("DO $$BEGIN NULL; END$$", "not a read: DO"),
    ("LISTEN kestrel", "not a read: LISTEN"),
    ("COMMIT", "not a read: COMMIT"),
    ("SHOW x; SHOW y", "2 statements: run one at a time"),
    ("WITH d AS (DELETE FROM x RETURNING *) SELECT * FROM d", "data-modifying CTE: DELETE"),
    ("SELECT * FROM (WITH u AS (UPDATE x SET a = 1 RETURNING a) SELECT a FROM u) s", "data-modifying CTE: UPDATE"),
    ("SELECT * INTO evil FROM workers", "SELECT ... INTO creates a table"),
    ("SELECT * FROM workers FOR UPDATE", "locking clause FOR UPDATE: row locks need a writable transaction"),
    (
        "SELECT * FROM workers FOR NO KEY UPDATE SKIP LOCKED",
        "locking clause FOR NO KEY UPDATE: row locks need a writable transaction",
    ),
    ("SELECT * FROM workers FOR SHARE", "locking clause FOR SHARE: row locks need a writable transaction"),
    ("SELECT * FROM workers FOR KEY SHARE", "locking clause FOR KEY SHARE: row locks need a writable transaction"),
    (
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM workers FOR UPDATE)",
        "locking clause FOR UPDATE: row locks need a writable transaction",
    ),
    ("EXPLAIN ANALYZE DELETE FROM workflow_executions", "EXPLAIN of a write: DELETE"),
    ("EXPLAIN (ANALYZE) UPDATE x SET a = 1", "EXPLAIN of a write: UPDATE"),
    ("EXPLAIN ANALYZE WITH d AS (DELETE FROM x RETURNING *) SELECT * FROM d", "data-modifying CTE: DELETE"),
    ("EXPLAIN", "EXPLAIN of nothing: give it a query"),
    ("SELECT pg_terminate_backend(1)", "function pg_terminate_backend: signals or inspects other sessions"),
    ("select PG_CATALOG.PG_CANCEL_BACKEND(1)", "function pg_cancel_backend: signals or inspects other sessions"),
    (
        'SELECT "pg_catalog"."pg_terminate_backend"(1)',
        "function pg_terminate_backend: signals or inspects other sessions",
    ),
    ("SELECT * FROM pg_terminate_backend(1)", "function pg_terminate_backend: signals or inspects other sessions"),
    ("SELECT set_config('search_path', 'public', false)", "function set_config: changes settings"),
    ("SELECT nextval('s')", "function nextval: changes a sequence"),
    ("SELECT pg_advisory_xact_lock(1)", "function pg_advisory_xact_lock: takes or inspects locks"),
    ("SELECT lo_unlink(1)", "function lo_unlink: works on large objects"),
    (
        "SELECT kestrel.decide_approval(1, 'gate', true, 'me', NULL)",
        "function decide_approval: is a Kestrel operator action: use the approve/reject/cancel/requeue commands",
    ),
    ("SELECT %(since)s::interval", "query parameter %(since)s: ad-hoc SQL takes no parameters (saved reports do)"),
    # Postgres's own lexer says what is unterminated (libpg_query's message and position).
    ("SELECT 'abc", 'cannot parse: unterminated quoted string at or near "\'abc" (at character 8)'),
    ("SELECT 1 /* open", 'cannot parse: unterminated /* comment at or near "/* open" (at character 10)'),
    ("SELECT $q$ abc", 'cannot parse: unterminated dollar-quoted string at or near "$q$ abc" (at character 8)'),
    ('SELECT "abc', 'cannot parse: unterminated quoted identifier at or near ""abc" (at character 8)'),
]


@pytest.mark.parametrize(("query", "reason"), REFUSALS)
def test_refusal_reasons(query: str, reason: str) -> None:
    assert refusal(query) == reason


def test_garbage_is_refused_as_unparsable() -> None:
    assert refusal("this is not sql ((").startswith("cannot parse: ")
    assert refusal("SELECT FROM WHERE (((").startswith("cannot parse: ")


def test_query_refused_is_a_kestrel_error_that_says_refused() -> None:
    with pytest.raises(KestrelError) as caught:
        check_read_only("DROP TABLE workers")
    assert isinstance(caught.value, QueryRefused)
    assert caught.value.reason == "not a read: DROP"
    assert str(caught.value) == "refused: not a read: DROP"


# One call per reviewed exclusion, by the reason the allowlist's builder gives.
REFUSED_CALLS = [
    ("pg_terminate_backend", "signals or inspects other sessions"),
    ("pg_cancel_backend", "signals or inspects other sessions"),
    ("set_config", "changes settings"),
    ("pg_read_file", "reads the server's files or directories"),
    ("pg_ls_dir", "reads the server's files or directories"),
    ("pg_stat_file", "reads the server's files or directories"),
    ("lo_unlink", "works on large objects"),
    ("pg_advisory_lock", "takes or inspects locks"),
    ("pg_try_advisory_xact_lock", "takes or inspects locks"),
    ("pg_notify", "sends notifications"),
    ("nextval", "changes a sequence"),
    ("txid_current", "assigns a transaction id"),
    ("query_to_xml", "runs SQL given as text"),
    ("ts_rewrite", "runs SQL given as text"),
    ("pg_switch_wal", "administers replication, WAL or backups"),
]


@pytest.mark.parametrize(("name", "why"), REFUSED_CALLS)
def test_every_refused_function_is_refused_in_every_spelling(name: str, why: str) -> None:
    for spelling in (
        f"SELECT {name}(1)",
        f"select pg_catalog.{name.upper()} (1)",
        f'SELECT 1 FROM "{name}"(1) AS f',
        f"SELECT * FROM workers WHERE 1 = {name}(2)",
    ):
        assert refusal(spelling) == f"function {name}: {why}", spelling


@pytest.mark.parametrize(
    "query",
    [
        "SELECT pg_sleep(0.01)",
        "SELECT pg_sleep_until(now())",
        "SELECT currval('s')",
        "SELECT lastval()",
        "SELECT txid_current_if_assigned()",
        "SELECT pg_current_xact_id_if_assigned()",
        "SELECT lower('x')",
    ],
)
def test_harmless_functions_next_to_refused_ones_are_allowed(query: str) -> None:
    check_read_only(query)


# Postgres and a naive lexer disagree about these; the guard must read them as Postgres does.
LEXING_TRICKS = [
    # Postgres nests block comments: it sees "DELETE FROM workflow_executions".
    ("/* /* */ SELECT 'x */ DELETE FROM workflow_executions --'", "not a read: DELETE"),
    (
        "/* /* */ SELECT 'x */ SELECT pg_terminate_backend(1) --'",
        "function pg_terminate_backend: signals or inspects other sessions",
    ),
    # standard_conforming_strings: a backslash does not escape the quote.
    ("SELECT 'a\\', pg_terminate_backend(1) --'", "function pg_terminate_backend: signals or inspects other sessions"),
    # $ inside identifiers does not start a dollar quote.
    (
        "SELECT 1 AS x$q$, pg_cancel_backend(1) AS y$q$",
        "function pg_cancel_backend: signals or inspects other sessions",
    ),
    # The escapes of a U& identifier spell a refused name: the parser decodes them.
    ('SELECT U&"pg_\\0074erminate_backend"(1)', "function pg_terminate_backend: signals or inspects other sessions"),
    (
        "SELECT U&'a' UESCAPE '!', U&\"pg_!0074erminate_backend\" UESCAPE '!' (1)",
        "function pg_terminate_backend: signals or inspects other sessions",
    ),
    # '#' is an operator in Postgres, not a comment.
    ("SELECT 1 # pg_terminate_backend(1)", "function pg_terminate_backend: signals or inspects other sessions"),
    # A comment between the name and its parenthesis.
    ("SELECT pg_terminate_backend /* hi */ (1)", "function pg_terminate_backend: signals or inspects other sessions"),
]


@pytest.mark.parametrize(("query", "reason"), LEXING_TRICKS)
def test_lexing_tricks_are_read_as_postgres_reads_them(query: str, reason: str) -> None:
    assert refusal(query) == reason


def test_report_placeholders_are_accepted_only_when_asked_for() -> None:
    report = (
        "-- description: errors since\n"
        "SELECT id FROM workflow_executions\n"
        "WHERE created_at > now() - %(since)s::interval AND workflow_name LIKE 'rep%%'\n"
        "LIMIT %(limit)s"
    )
    check_read_only(report, placeholders=True)
    assert refusal(report) == "query parameter %(since)s: ad-hoc SQL takes no parameters (saved reports do)"


def test_placeholder_mode_still_refuses_what_it_hides() -> None:
    assert refusal("SELECT %(x)s; DELETE FROM workers", placeholders=True) == "2 statements: run one at a time"
    assert refusal("SELECT %(x)s FROM workers FOR UPDATE", placeholders=True).startswith("locking clause FOR UPDATE")
    assert refusal("SELECT pg_terminate_backend(%(pid)s)", placeholders=True).startswith(
        "function pg_terminate_backend: "
    )


def test_placeholders_inside_ad_hoc_strings_are_just_text() -> None:
    check_read_only("SELECT '%(since)s' AS literal, 'x%%' AS percent")


@pytest.mark.parametrize(
    "query",
    [
        "SELECT generate_series(now() - interval '1 hour', now(), interval '1 minute')",
        "SELECT date '2024-01-01', timestamptz '2024-01-01 00:00', now() - interval '2 days'",
        "SELECT count(*) FROM workflow_executions WHERE created_at > now() - '1 month'::interval",
    ],
)
def test_typed_literals_are_accepted(query: str) -> None:
    check_read_only(query)


# --- the allowlist: names as Postgres resolves them ----------------------------------------------

ALLOWLIST_REFUSALS = [
    # An alias of the same name does not make a call pass (exemptions are counted).
    ("SELECT ifnull(a, b) FROM (VALUES (1, 2)) AS ifnull(a, b)", "function ifnull: "),
    ("SELECT (1).pg_config FROM pg_catalog.pg_config", "function pg_config: "),
    # Quoted names keep their case: "Lower" is not pg_catalog.lower.
    ("SELECT \"Lower\"('x')", "function Lower: not a built-in function"),
    ("SELECT public.lower('x')", "function public.lower: only pg_catalog functions"),
    ("SELECT kestrel.prune_finished(now(), 10, 'me')", "function prune_finished: is a Kestrel operator action"),
    (
        "SELECT x FROM (SELECT 1 AS x) s WHERE s.x = (s).pg_terminate_backend",
        "function pg_terminate_backend: signals or inspects other sessions (attribute notation",
    ),
    ("SELECT ({pid}) . /* hidden */ pg_cancel_backend".replace("{pid}", "1"), "function pg_cancel_backend: "),
    ("SELECT (arr)[1].pg_terminate_backend FROM (SELECT ARRAY[1] AS arr) s", "function pg_terminate_backend: "),
    ("SELECT ts_rewrite('a'::tsquery, 'SELECT 1')", "function ts_rewrite: runs SQL given as text"),
    ("SELECT * FROM ts_stat('SELECT 1')", "function ts_stat: runs SQL given as text"),
    ("SELECT setseed(0.5)", "function setseed: not on the allowlist of side-effect-free functions"),
]


@pytest.mark.parametrize(("query", "reason"), ALLOWLIST_REFUSALS)
def test_allowlist_refusals(query: str, reason: str) -> None:
    assert refusal(query).startswith(reason), refusal(query)


# --- types and operators named with a schema: code the query does not name -----------------------

QUALIFIED_REFUSALS = [
    ("SELECT 1::public.kt_dom", "type public.kt_dom: only pg_catalog types may be named with a schema"),
    ('SELECT 1::"public".kt_dom', "type public.kt_dom: "),
    ("SELECT CAST(1 AS public.kt_dom)", "type public.kt_dom: "),
    ("SELECT ARRAY[1]::public.kt_dom[]", "type public.kt_dom: "),
    ("SELECT 1::mydb.public.kt_dom", "type mydb.public.kt_dom: "),
    ("SELECT * FROM json_to_record('{}') AS t(a public.kt_dom)", "type public.kt_dom: "),
    ("SELECT * FROM xmltable('/x' PASSING '<x/>' COLUMNS a public.kt_dom PATH '.')", "type public.kt_dom: "),
    ("SELECT 1 OPERATOR(public.===) 1", "operator public.===: only pg_catalog operators may be named"),
    ('SELECT 1 OPERATOR("public".===) 1 FROM workers', "operator public.===: "),
    ("SELECT * FROM workers ORDER BY worker_id USING OPERATOR(public.===)", "operator public.===: "),
    ("SELECT 1 WHERE 1 OPERATOR(public.===) ANY (SELECT 1)", "operator public.===: "),
    ("SELECT 1 === 1", "operator ===: not a built-in operator"),
    ("SELECT NULL::workflow_executions", "type workflow_executions: not a built-in type"),
    ("SELECT NULL::kt_dom[]", "type kt_dom: not a built-in type"),
]


@pytest.mark.parametrize(("query", "reason"), QUALIFIED_REFUSALS)
def test_types_and_operators_of_other_schemas_are_refused(query: str, reason: str) -> None:
    assert refusal(query).startswith(reason), refusal(query)


def test_catalog_types_and_operators_may_be_qualified() -> None:
    check_read_only(
        "SELECT 1::pg_catalog.int4, CAST(2 AS PG_CATALOG.int8), 3 OPERATOR(pg_catalog.+) 4, "
        "'{}'::pg_catalog.jsonb, 1::int, w.hostname FROM public.workers w"
    )


def test_every_reviewed_volatile_reader_is_allowed_and_no_exclusion_swallows_one() -> None:
    # The exclusion "lock" once matched clock_timestamp (c-lock-...): a reviewed reader refused
    # as "takes or inspects locks".
    from kestrel_console.adhoc.allowlist import allowed_names
    from kestrel_console.adhoc.allowlist_build import REVIEWED_VOLATILE, excluded

    assert {name: excluded(name) for name in REVIEWED_VOLATILE if excluded(name)} == {}
    assert set(REVIEWED_VOLATILE) <= allowed_names()
    check_read_only("SELECT clock_timestamp(), timeofday(), random(), gen_random_uuid(), pg_stat_get_db_deadlocks(1)")
    for name in (
        "pg_advisory_lock",
        "pg_try_advisory_xact_lock_shared",
        "pg_advisory_unlock_all",
        "pg_lock_status",
        "pg_blocking_pids",
    ):
        assert refusal(f"SELECT {name}(1)") == f"function {name}: takes or inspects locks"


# --- issue 18: what the hand-written lexer got wrong, read by Postgres's own grammar ------------


@pytest.mark.parametrize(("query", "name"), SHAPES)
def test_string_continuation_shapes_are_refused(query: str, name: str) -> None:
    # Postgres joins E'a' + newline + 'b\' ...' into one escape string: the code after it is code.
    reason = refusal(query)
    assert reason.startswith((f"function {name}: ", "cannot parse: ")), (query, reason)


def test_the_continuation_is_one_literal_to_the_guard() -> None:
    tree = check_read_only("SELECT E'a'\n'b\\' , 1 AS ' AS x, lower($$q$$) AS y --'")
    first, second = tree.targetList
    assert (first.name, first.val.val.sval) == ("x", "ab' , 1 AS ")
    assert (second.name, second.val.funcname[-1].sval) == ("y", "lower")


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("SELECT * FROM workers TABLESAMPLE system_rows(10)", "TABLESAMPLE system_rows: only SYSTEM and BERNOULLI"),
        ("SELECT * FROM pg_file_settings", "relation pg_file_settings: reads the server's files"),
        ("SELECT * FROM pg_catalog.pg_hba_file_rules", "relation pg_hba_file_rules: reads the server's files"),
        ("SELECT * FROM otherdb.kestrel.workers", "relation otherdb.kestrel.workers: relations of another database"),
        ("SELECT lo_from_bytea(0, 'x')", "function lo_from_bytea: works on large objects"),
        (
            "SELECT pg_create_logical_replication_slot('s', 'test_decoding')",
            "function pg_create_logical_replication_slot: administers replication",
        ),
        ("SELECT a.b.c.d()", "function a.b.c.d: only pg_catalog functions"),
        ("SELECT $1", "query parameter $1: ad-hoc SQL takes no parameters"),
        ("SELECT extract(epoch FROM now()), now() AT TIME ZONE 'UTC', trim(' x '), 1 IS DISTINCT FROM 2", None),
        ("SELECT x FROM generate_series(1, 3) TABLESAMPLE BERNOULLI (50) AS g(x)", "cannot parse: "),
        ("SELECT * FROM workers TABLESAMPLE BERNOULLI (50) REPEATABLE (1)", None),
    ],
)
def test_every_node_of_the_tree_is_checked(query: str, reason: str | None) -> None:
    if reason is None:
        check_read_only(query)
    else:
        assert refusal(query).startswith(reason), refusal(query)


# -- issue 44: values built in the server's memory are bounded by their arguments --------------

BUILDERS = [
    # The red team's: four such columns took a reader backend to 4.8 GB (1.2 GB per 8 s).
    ("SELECT md5(repeat(repeat('a', 1000000), 1000))", "function repeat: needs a literal text and count"),
    ("SELECT repeat('ab', 500001)", "function repeat: needs a literal text and count"),
    ("SELECT repeat(status, 3) FROM workflow_executions", "function repeat: needs a literal text and count"),
    ("SELECT repeat('a', n) FROM generate_series(1, 3) n", "function repeat: needs a literal text and count"),
    ("SELECT lpad('x', 2000000)", "function lpad: needs a literal length"),
    ("SELECT rpad(status, length(status) * 1000000) FROM workflow_executions", "function rpad: needs a literal length"),
    ("SELECT array_fill(1, ARRAY[1000000000])", "function array_fill: builds an array of any size"),
    # 1.7 GB: the duplicate check of a recursive UNION is a hash table no setting bounds.
    (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT n + 1 FROM r) SELECT count(*) FROM r",
        "recursive CTE r joined by UNION",
    ),
]


# issue 44, round three: what the first rule let through (each made a value of 100 MB to 1 GB,
# or a backend of GBs: tests/console/adhoc/test_value_sizes.py measures them on a server).
BUILDERS_ROUND_THREE = [
    ("SELECT format('%999999999s', 'x')", "function format: widths over 1,000,000 characters"),
    ("SELECT format('%*s', 999999999, 'x')", "function format: a * width"),
    ("SELECT format('%1$*2$s', 'x', 999999999)", "function format: a * width"),
    ("SELECT format(status || '%999999999s', 'x') FROM workflow_executions", "function format: needs a literal"),
    ("SELECT format('%1$s%1$s%1$s', status) FROM workflow_executions", "function format: argument 1 is used more"),
    ("SELECT format('%s%1$s', status) FROM workflow_executions", "function format: argument 1 is used more"),
    (
        "SELECT replace(repeat('a', 1000), 'a', repeat('b', 1000000))",
        "function replace: its replacement is copied once per match",
    ),
    ("SELECT replace(status, 'a', status) FROM workflow_executions", "function replace: its replacement"),
    (
        "SELECT regexp_replace(repeat('a', 100000), '', repeat('b', 1000), 'g')",
        "function regexp_replace: its replacement",
    ),
    ("SELECT regexp_replace(status, '', '" + "x" * 101 + "', 'g') FROM workflow_executions", "function regexp_repl"),
    ("SELECT array_to_string(ARRAY[1, 2], repeat('x', 1000000))", "function array_to_string: its separator"),
    ("SELECT array_to_string(ARRAY[1, NULL], ',', status) FROM workflow_executions", "function array_to_string"),
    ("SELECT concat_ws(status, VARIADIC ARRAY['a']) FROM workflow_executions", "function concat_ws: its separator"),
    ("SELECT repeat('a', 600000) || repeat('a', 600000)", "function repeat: the query's repeat, lpad, rpad and"),
    ("SELECT concat(repeat('a', 900000), lpad('x', 200000))", "function lpad: the query's repeat"),
    ("SELECT lpad('x', g) FROM generate_series(1, 10) g", "function lpad: needs a literal length"),
    ("SELECT lpad('x', length(status) * 1000) FROM workflow_executions", "function lpad: needs a literal length"),
    ("SELECT array_fill('x'::text, ARRAY[100000000])", "function array_fill: builds an array of any size"),
    ("SELECT cardinality(ARRAY(SELECT g FROM generate_series(1, 1e8) g))", "ARRAY(SELECT ...) over rows the query"),
    ("SELECT cardinality(array_agg(g)) FROM generate_series(1, 100000000) g", "array_agg over rows the query makes"),
    ("SELECT length(string_agg(g::text, ',')) FROM generate_series(1, 1e8) g", "string_agg over rows"),
    ("SELECT length(jsonb_agg(g)::text) FROM generate_series(1, 1e8) g", "jsonb_agg over rows"),
    ("SELECT length(json_agg(g)::text) FROM generate_series(1, 1e8) g", "json_agg over rows"),
    ("SELECT xmlagg(xmlelement(name a, g)) FROM generate_series(1, 1e8) g", "xmlagg over rows"),
    ("SELECT jsonb_object_agg(g, g) FROM generate_series(1, 1e8) g", "jsonb_object_agg over rows"),
    (
        "SELECT array_agg(g) FROM generate_series(1, 1000) a, generate_series(1, 1000) g",
        "array_agg over rows the query makes (VALUES and set-returning functions making up to 1,000,000 rows",
    ),
    ("SELECT array_agg(g) FROM generate_series(1, count(*)) g", "array_agg over rows the query makes"),
    (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT array_agg(n) FROM r",
        "array_agg over rows the query makes (a recursive CTE)",
    ),
]


@pytest.mark.parametrize(("query", "reason"), BUILDERS + BUILDERS_ROUND_THREE)
def test_value_builders_are_argument_bounded(query: str, reason: str) -> None:
    refused = refusal(query)
    assert refused.startswith(reason), refused


# What the rules above must still let through: the same builders, bounded.
BOUNDED_BUILDERS = [
    "SELECT format('%s: %-20s|%10s %%', 1, 'a', 'b')",
    "SELECT format('%2$s %1$s', 'a', 'b')",
    "SELECT replace(status, 'e', 'E'), regexp_replace(status, '(e)', '<\\1>', 'g') FROM workflow_executions",
    "SELECT array_to_string(ARRAY[1, NULL], ', ', '-'), concat_ws(', ', 'a', 'b')",
    "SELECT repeat('-', 20) || status || repeat('-', 20), lpad(workflow_name, 30) FROM workflow_executions",
    "SELECT array_agg(status), string_agg(workflow_name, ', ') FROM workflow_executions",
    "SELECT ARRAY(SELECT g FROM generate_series(1, 10) g)",
    "SELECT g, count(*) FROM generate_series(1, 100) g GROUP BY g",
    "SELECT translate(status, 'a', 'b') FROM workflow_executions",
    "SELECT repeat('-', 40)",
    "SELECT repeat('ab'::text, 500000)",
    "SELECT lpad(status, 12) FROM workflow_executions",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10) SELECT count(*) FROM r",
]


@pytest.mark.parametrize("query", BOUNDED_BUILDERS)
def test_bounded_uses_of_builders_still_run_through_the_guard(query: str) -> None:
    check_read_only(query)
