"""Builders the size rule (kestrel_console/adhoc/sizes.py) let through until review r44b: refused.

Promise (docs/guarantees.md, "Security: ad-hoc SQL and reports"): ad-hoc SQL cannot "build a
value larger than its arguments by more than a constant factor, or one value from rows the
query makes"; such a query is refused by the guard before it reaches the server (the
docs: "refused before it builds, under 64 MB").

Each query below passes ``check_read_only`` on HEAD (539a043) and builds hundreds of MB to
1 GB on the server (measured on the local PostgreSQL 15, as ``kestrel_reader`` through
``run_read_only``: the ``ts_headline`` and ``array_agg`` shapes were stopped only by the
backend memory watchdog at 513 MB; on a server on another host nothing but the wall clock
stops them). Reproduce: ``kestrel-console sql "<query>"`` as a reader login.
"""

from __future__ import annotations

import psycopg
import pytest

from kestrel_console.adhoc.allowlist import allowed_names
from kestrel_console.adhoc.guard import QueryRefused, check_read_only
from kestrel_console.adhoc.sizes import LITERAL_BOUNDED_ROWS, SET_RETURNING

DEPTH = 14_000  # 28 KB of text; jsonb_pretty indents each level: about 2 * DEPTH**2 bytes out

BUILDERS = [
    pytest.param(
        # string_agg's delimiter is copied once per row, like array_to_string's separator (a
        # copier the rule lists): 1,000 rows x 900 KB = 900 MB from a 90-character query.
        "SELECT length(string_agg(x::text, repeat('y', 900000))) FROM generate_series(1, 1000) x",
        id="string_agg-delimiter-is-a-copier",
    ),
    pytest.param(
        # ts_headline copies StartSel (and StopSel) once per highlighted word: a product of two
        # sizes. 100,000 words x 9,000 characters = 900 MB (stopped at 513 MB by the watchdog).
        "SELECT length(ts_headline('english', repeat('foo ', 100000), 'foo'::tsquery, "
        "'HighlightAll=true, StartSel=' || repeat('x', 9000)))",
        id="ts_headline-startsel-per-word",
    ),
    pytest.param(
        # jsonb_pretty indents each nesting level by 4 spaces per line: quadratic in the depth.
        # A 28 KB literal gives about 780 MB (10,000 levels measured: 400 MB).
        "SELECT length(jsonb_pretty('" + "[" * DEPTH + "]" * DEPTH + "'::jsonb))",
        id="jsonb_pretty-quadratic-in-depth",
    ),
    pytest.param(
        # An accumulator over rows the query makes with a set-returning function other than
        # generate_series: 100,000 rows x 1,000 characters = 100 MB in one value.
        "SELECT length(string_agg(repeat('a', 1000), '')) FROM regexp_split_to_table(repeat('b', 100000), '') t",
        id="accumulator-over-regexp_split_to_table-rows",
    ),
    pytest.param(
        # Or over a cross join of VALUES lists: 10^5 made rows, none counted.
        "SELECT length(string_agg(repeat('a', 1000), '')) FROM "
        + ", ".join(f"(VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10)) v{i}(x)" for i in range(5)),
        id="accumulator-over-cross-joined-VALUES",
    ),
    pytest.param(
        # Or over unnest/jsonb_array_elements/generate_subscripts in a LATERAL beside a counted
        # series: the counted 100,000 rows times 10 uncounted ones.
        "SELECT length(string_agg(s, '')) FROM (SELECT repeat('a', 1000) s FROM generate_series(1, 100000)) q, "
        "LATERAL jsonb_array_elements('[1,2,3,4,5,6,7,8,9,10]') j",
        id="accumulator-over-lateral-jsonb_array_elements",
    ),
    pytest.param(
        # The generators' budget counts a repeat() once in the text, but an accumulator copies
        # its value once per row: 1,000 literal-bounded rows x 900 KB = 900 MB in one array
        # (stopped at 513 MB by the watchdog).
        "SELECT cardinality(array_agg(repeat('a', 900000))) FROM generate_series(1, 1000) x",
        id="accumulator-copies-a-generated-value-per-row",
    ),
]


@pytest.mark.parametrize("query", BUILDERS)
def test_a_builder_of_hundreds_of_mb_is_refused_before_it_reaches_the_server(query: str) -> None:
    with pytest.raises(QueryRefused):
        check_read_only(query)


RUN = [
    # what the rules leave: short literal copiers, set-returning functions over literals, and
    # generators whose characters times the rows made stay within the budget
    "SELECT string_agg(g::text, ', ') FROM generate_series(1, 1000) g",
    "SELECT ts_headline('english', 'a foo b', to_tsquery('foo'), 'StartSel=<b>, StopSel=</b>')",
    "SELECT ts_headline('a foo b', 'foo'::tsquery, 'StartSel=<b>')",
    "SELECT ts_headline('english', 'a foo b', 'foo'::tsquery)",
    "SELECT array_agg(x) FROM unnest('{1,2,3}'::int[]) x",
    "SELECT string_agg(j::text, ',') FROM jsonb_array_elements('[1, 2, 3]') j, (VALUES (1), (2)) v(x)",
    "SELECT array_agg(repeat('a', 10)) FROM generate_series(1, 1000) g",
    "SELECT array_agg(status), string_agg(lpad(workflow_name, 30), ', ') FROM workflow_executions",
    "SELECT unnest(ARRAY[1, 2]), jsonb_array_elements(payload) FROM workflow_executions",  # no accumulator
]


@pytest.mark.parametrize("query", RUN)
def test_bounded_builders_still_run(query: str) -> None:
    check_read_only(query)


MORE_REFUSED = [
    "SELECT ts_headline('english', 'a foo b', 'foo'::tsquery, status) FROM workflow_executions",
    "SELECT ts_headline('a foo b', 'foo'::tsquery, 'StartSel=' || repeat('x', 200))",
    "SELECT array_agg(x) FROM workflow_executions, unnest(ARRAY[1, 2]) x",
    "SELECT array_agg(k) FROM pg_timezone_names() k",
    "SELECT string_agg(j, ',') FROM jsonb_path_query('[[1]]', '$[0,0][0,0]') j",
    "SELECT string_agg(repeat('a', 101), '') FROM workflow_executions",
    "SELECT string_agg(s, '') FROM (SELECT repeat('a', 1000) s FROM generate_series(1, 10000)) q",
]


@pytest.mark.parametrize("query", MORE_REFUSED)
def test_more_shapes_of_the_same_builders_are_refused(query: str) -> None:
    with pytest.raises(QueryRefused):
        check_read_only(query)


def test_set_returning_lists_every_allowed_set_returning_function(admin_dsn: str) -> None:
    """SET_RETURNING is every allowlisted pg_catalog function that returns a set: one missing
    would make rows the accumulator rule does not count."""
    with psycopg.connect(admin_dsn) as conn:
        catalog = {
            name
            for (name,) in conn.execute(
                "SELECT DISTINCT proname FROM pg_proc WHERE proretset AND pronamespace = 'pg_catalog'::regnamespace"
            )
        }
    assert catalog & allowed_names() == SET_RETURNING
    assert LITERAL_BOUNDED_ROWS <= SET_RETURNING
