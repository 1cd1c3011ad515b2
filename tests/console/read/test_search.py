"""The executions search (issue 46, finding 2): the filter language's grammar, and each key
against the truth computed from the rows: id:, key:, input.x=, since:/from:/until: (an id
range found by a binary search of the primary key, the exact times kept), free text in its
window, and every combination of them (Hypothesis)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel_console.read import Reader
from kestrel_console.read.search import ExecutionFilter, InputMatch, parse_filter
from kestrel_core import STATUSES

# -- the grammar ----------------------------------------------------------------------------


def test_every_key_parses() -> None:
    f = parse_filter(
        'id:#42 key:order-7 s:error wf:=remediate input.pod=api-1 input.order.id=7 since:2h from:"2026-12-06 14:30" '
        "until:2026-12-07 upstream 502"
    )
    assert f.id == 42 and f.key == "order-7" and f.status == "error"
    assert f.workflow == "remediate" and f.exact
    assert f.inputs == (InputMatch(("pod",), "api-1"), InputMatch(("order", "id"), "7"))
    assert f.since_s == 7200.0 and f.start == "2026-12-06 14:30" and f.end == "2026-12-07"
    assert f.start_moment.at == datetime(2026, 12, 6, 14, 30).astimezone()
    assert f.text == "upstream 502"
    assert parse_filter("from:3d").start_moment.ago_s == 3 * 86400
    assert parse_filter("until:2026-12-06T10:00Z").end_moment.at == datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
    assert parse_filter("from:9:05").start_moment.at.time().isoformat() == "09:05:00"
    assert parse_filter("").empty and parse_filter("id:1").describe() == "id:1"
    assert "the newest 2,000 executions" in parse_filter("boom").describe()


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("status:bogus", "unknown status 'bogus'"),
        ("since:2x", "since:2x: write the span as 90s"),
        ("from:yesterday", "from:yesterday: write a time as 2026-12-06"),
        ("until:25:99", "until:25:99: write a time"),
        ("id:abc", "id:abc: an execution id is a positive number"),
        ("id:0", "id:0: an execution id is a positive number"),
        ("id:99999999999999999999", "an execution id is a positive number"),
        ("key:", "key: name the idempotency key"),
        ("input.=x", "input.=x: name the field"),
        ("input.a..b=x", "name the field"),
    ],
)
def test_bad_keys_say_how_to_write_them(typed: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(".", r"\.")):
        parse_filter(typed)


def test_input_documents_cover_text_scalars_and_arrays() -> None:
    assert [json.loads(d) for d in InputMatch(("pod",), "api-1").documents()] == [{"pod": "api-1"}, {"pod": ["api-1"]}]
    assert [json.loads(d) for d in InputMatch(("a", "n"), "7").documents()] == [
        {"a": {"n": "7"}},
        {"a": {"n": ["7"]}},
        {"a": {"n": 7}},
        {"a": {"n": [7]}},
    ]
    assert {json.dumps(json.loads(d)) for d in InputMatch(("ok",), "true").documents()} >= {'{"ok": true}'}


words = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
filters = st.builds(
    ExecutionFilter,
    status=st.none() | st.sampled_from(STATUSES),
    workflow=st.none() | words.filter(lambda w: not w.startswith("=")),
    exact=st.booleans(),
    id=st.none() | st.integers(1, 2**63 - 1),
    key=st.none() | words,
    inputs=st.lists(
        st.builds(
            InputMatch,
            st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), min_size=1, max_size=3).map(tuple),
            words | st.just(""),
        ),
        max_size=2,
    ).map(tuple),
    since=st.none() | st.sampled_from(["90s", "30m", "2h", "7d", "1.5h"]),
    start=st.none() | st.sampled_from(["2026-12-06", "2026-12-06 14:30", "3d", "09:30"]),
    end=st.none() | st.sampled_from(["2026-12-07T10:00+02:00", "2d"]),
)


@given(filters)
@settings(max_examples=300, deadline=None)
def test_a_filter_reads_back_as_itself(f: ExecutionFilter) -> None:
    """What a list's header shows (str) is what the filter line is filled with (``/`` again):
    read back, it is the same filter, whatever the quotes, colons and spaces in its values."""
    if f.workflow is None:
        f = f.merged(exact=False)
    assert parse_filter(str(f)) == f.merged(text=None)


# -- against the rows -------------------------------------------------------------------------

N = 600
PODS = 7
NAMES = ["billing", "remediate", "remediate-incident", "ci"]
# Every execution a minute apart, oldest first (ids grow with created_at, as the engine writes
# them); the inputs hold a pod (a string), a count (a number), tags (an array) and a nested
# order; every 5th has an idempotency key, every 3rd an error, step ids named after its pod.
SEED = """
INSERT INTO workflow_executions
    (workflow_name, status, input, error, owner_id, idempotency_key, created_at, updated_at, run_at)
SELECT (%(names)s::text[])[1 + i %% 4],
       (%(statuses)s::text[])[1 + i %% 6],
       jsonb_build_object('pod', 'api-' || (i %% %(pods)s), 'n', i %% 10, 'tags', jsonb_build_array('t' || (i %% 4)),
                          'order', jsonb_build_object('id', i %% 9)),
       CASE WHEN i %% 3 = 0 THEN 'boom ' || i END,
       'worker-' || (i %% 2), CASE WHEN i %% 5 = 0 THEN 'key-' || i END,
       %(now)s::timestamptz - make_interval(mins => %(n)s - i), %(now)s::timestamptz, %(now)s::timestamptz
  FROM generate_series(1, %(n)s) AS i
 ORDER BY i
"""
STEPS = """
INSERT INTO step_attempts (execution_id, step_id, attempt, started_at)
SELECT id, 'fetch-' || (input->>'pod'), 1, created_at FROM workflow_executions WHERE id % 4 = 0
"""


@pytest.fixture(scope="module")
def searched(request) -> Iterator[tuple[str, list[dict], datetime]]:
    from kestrel_core import Kestrel
    from tests.conftest import create_database, drop_at_the_end

    dsn = create_database("kestrel_search")
    try:
        with Kestrel(dsn) as app:
            app.migrate()
        with psycopg.connect(dsn, autocommit=True, options="-c search_path=kestrel") as conn:
            now = conn.execute("SELECT date_trunc('second', now())").fetchone()[0]
            conn.execute(
                SEED,
                {"names": NAMES, "statuses": [s for s in STATUSES if s != "paused"], "pods": PODS, "n": N, "now": now},
            )
            conn.execute(STEPS)
            conn.execute("ANALYZE workflow_executions")
            rows = conn.execute(
                "SELECT e.id, e.workflow_name, e.status, e.input, e.error, e.owner_id, e.idempotency_key, e.created_at,"
                " coalesce((SELECT array_agg(step_id) FROM step_attempts a WHERE a.execution_id = e.id), '{}') AS steps"
                " FROM workflow_executions e ORDER BY id DESC"
            ).fetchall()
        cols = ["id", "workflow_name", "status", "input", "error", "owner_id", "key", "created_at", "steps"]
        yield dsn, [dict(zip(cols, r, strict=True)) for r in rows], now
    finally:
        drop_at_the_end(dsn)


def _at(path: tuple[str, ...], value: object) -> list[object]:
    for name in path:
        if not isinstance(value, dict) or name not in value:
            return []
        value = value[name]
    return value if isinstance(value, list) else [value]


def _input_holds(row: dict, m: InputMatch) -> bool:
    wanted: list[object] = [m.value]
    try:
        scalar = json.loads(m.value)
    except ValueError:
        pass
    else:
        if not isinstance(scalar, (dict, list, str)):
            wanted.append(scalar)
    found = _at(m.path, row["input"])
    return any(w == v and type(w) is type(v) for w in wanted for v in found)


def truth(rows: list[dict], f: ExecutionFilter, now: datetime, text_window: int) -> list[int]:
    """The ids the filter selects, computed in Python from the rows (newest first)."""
    lo = hi = None
    if f.since_s is not None:
        lo = now - timedelta(seconds=f.since_s)
    start, end = f.start_moment, f.end_moment
    if start is not None:
        t = start.at if start.at is not None else now - timedelta(seconds=start.ago_s)
        lo = t if lo is None else max(lo, t)
    if end is not None:
        hi = end.at if end.at is not None else now - timedelta(seconds=end.ago_s)
    keep = []
    for r in rows:
        if f.id is not None and r["id"] != f.id:
            continue
        if f.key is not None and r["key"] != f.key:
            continue
        if f.status and r["status"] != f.status:
            continue
        if f.workflow and not (
            r["workflow_name"] == f.workflow if f.exact else r["workflow_name"].startswith(f.workflow)
        ):
            continue
        if not all(_input_holds(r, m) for m in f.inputs):
            continue
        if lo is not None and r["created_at"] < lo:
            continue
        if hi is not None and r["created_at"] >= hi:
            continue
        keep.append(r)
    if f.text:
        t = f.text.lower()
        keep = [
            r
            for r in keep[:text_window]
            if t in r["workflow_name"].lower()
            or t in (r["owner_id"] or "").lower()
            or t in (r["error"] or "").lower()
            or str(r["id"]) == f.text
            or t in json.dumps(r["input"]).lower()
            or any(t in s.lower() for s in r["steps"])
        ]
    return [r["id"] for r in keep]


@pytest.fixture
def window(monkeypatch) -> int:
    """A small free-text window, so that it binds on this history."""
    import kestrel_console.read.executions as executions

    monkeypatch.setattr(executions, "TEXT_WINDOW_ROWS", 50)
    return 50


EXAMPLES = [
    "id:7",
    "key:key-35",
    "key:key-36",
    "input.pod=api-3",
    "input.n=7",
    "input.tags=t2",
    "input.order.id=4 status:error",
    "input.pod=api-3 input.n=3",
    "since:30m",
    "since:90m status:success",
    "from:2h until:1h",
    "from:5h until:4h workflow:remediate",
    "workflow:=remediate since:3h",
    "boom",
    "fetch-api-2",
    "boom status:success",
    "api-5 until:3h",
    "worker-1 from:8h until:6h",
]


@pytest.mark.parametrize("typed", EXAMPLES)
def test_each_key_selects_what_the_rows_say(searched, window, typed: str) -> None:
    dsn, rows, now = searched
    f = parse_filter(typed)
    with Reader(dsn) as reader:
        now = reader.now()  # spans are measured on the database's clock, when the list is read
        got = [r["id"] for r in reader.list_executions(where=f, limit=1000)]
    assert got == truth(rows, f, now, window)
    assert got or typed.startswith("key:key-36")  # each example selects something (but the missing key)


def test_the_window_ends_are_exact_to_the_second(searched) -> None:
    """Rows a minute apart: from: takes the row created at that time, until: stops before it."""
    dsn, rows, now = searched
    with Reader(dsn) as reader:
        for minutes in (1, 59, 60, 61, 599):
            at = (now - timedelta(minutes=minutes)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            got_from = [r["id"] for r in reader.list_executions(where=parse_filter(f"from:{at}"), limit=1000)]
            got_until = [r["id"] for r in reader.list_executions(where=parse_filter(f"until:{at}"), limit=1000)]
            assert len(got_from) == minutes + 1 and len(got_until) == N - minutes - 1
            assert set(got_from).isdisjoint(got_until)


def test_an_execution_enqueued_late_in_its_transaction_is_found_within_the_skew(searched) -> None:
    """created_at is its transaction's start: an insert 4 minutes into a transaction has an id
    above rows created after it (and after the window's end). The 5 minutes looked past each end
    cover it."""
    dsn, _, _ = searched
    with psycopg.connect(dsn, autocommit=True, options="-c search_path=kestrel") as conn:
        (late,) = conn.execute(
            "INSERT INTO workflow_executions (workflow_name, status, created_at, updated_at, run_at)"
            " VALUES ('late', 'success', now() - interval '4 minutes', now(), now()) RETURNING id"
        ).fetchone()
        try:
            with Reader(dsn) as reader:
                got = [r["id"] for r in reader.list_executions(where=parse_filter("from:5m until:3m"), limit=10)]
            assert late in got
        finally:
            conn.execute("DELETE FROM workflow_executions WHERE id = %s", (late,))


@given(
    status=st.none() | st.sampled_from(STATUSES),
    workflow=st.none() | st.sampled_from(["remediate", "ci", "bill", "x"]),
    pod=st.none() | st.integers(0, PODS),
    since=st.none() | st.sampled_from(["20m", "3h", "7d"]),
    until=st.none() | st.sampled_from(["2h", "30m"]),
    text=st.none() | st.sampled_from(["boom", "api-1", "fetch", "worker-0", "zz"]),
    before=st.none() | st.integers(1, N),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_combination_selects_what_the_rows_say(searched, window, status, workflow, pod, since, until, text, before):
    dsn, rows, now = searched
    f = ExecutionFilter(
        status=status,
        workflow=workflow,
        inputs=() if pod is None else (InputMatch(("pod",), f"api-{pod}"),),
        since=since,
        end=until,
        text=text,
    )
    with Reader(dsn) as reader:
        now = reader.now()
        got = [r["id"] for r in reader.list_executions(where=f, limit=1000, before_id=before)]
    older = [r for r in rows if before is None or r["id"] < before]
    assert got == truth(older, f, now, window)
