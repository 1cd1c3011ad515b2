"""Saved reports: every shipped report answers correctly on seeded history; discovery,
header validation, parameter binding, and the read-only guard."""

from __future__ import annotations

import csv
import functools
import math
import tomllib
from collections import defaultdict
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from psycopg.types.json import Jsonb

from kestrel_console import reports
from kestrel_console.reports import (
    Report,
    ReportError,
    ReportNotFound,
    bind_params,
    discover,
    discovery,
    find_report,
    load_report,
    shipped_dir,
    write_csv,
)
from kestrel_core import KestrelError
from tests.seed import SeedFacts, seed_history

REPO = Path(__file__).resolve().parents[3]
SHIPPED = {
    "queue-depth",
    "stuck-leases",
    "pending-approvals",
    "errors-this-month",
    "rejected-fixes",
    "slowest-steps",
    "throughput",
    "worker-activity",
    "retries",
    "approval-latency",
    "operator-actions",
    "queues",
    "schedules",
}
from kestrel_console.reports import run_report as _run_report

# The db fixture is the test server's superuser: user reports run on it only when allowed
# (shipped ones run anyway); tests/cli/test_sql_privileged.py tests the refusal.
run_report = functools.partial(_run_report, allow_privileged=True)


@pytest.fixture
def facts(db) -> SeedFacts:
    return seed_history(db)


def run(db, name: str, extra_dirs=(), **given: str) -> list[dict[str, Any]]:
    """Run a report by name with text parameters; rows as dicts."""
    report = find_report(name, extra_dirs)
    result = run_report(db, report, bind_params(report, given), schema="kestrel")
    return [dict(zip(columns(result), row)) for row in result.rows]


def columns(result) -> list[str]:
    return [c if isinstance(c, str) else c.name for c in result.columns]


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.sql"
    path.write_text(text)
    return path


def percentile(values: list[float], q: float) -> float:
    """Postgres percentile_cont: linear interpolation between the closest ranks."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def rounded(value: float) -> Decimal:
    """float8 -> numeric (15 significant digits) -> round(_, 3), as the report does."""
    return Decimal(f"{value:.15g}").quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)


def truncated(value: timedelta) -> timedelta:
    return timedelta(seconds=int(value.total_seconds()))


# ---------------------------------------------------------------------------------------------
# Each shipped report on the seeded history
# ---------------------------------------------------------------------------------------------


def test_every_required_report_is_shipped_with_a_description():
    found = discover()
    assert SHIPPED <= set(found)
    for name in SHIPPED:
        report = found[name]
        assert report.shipped and report.path.parent == shipped_dir()
        assert len(report.description) > 20, name


def test_queue_depth(db, facts):
    rows = run(db, "queue-depth")
    expected = defaultdict(lambda: dict(due=0, delayed=0, running=0, waiting=0, oldest=None))
    for e in facts.executions.values():
        if e.status == "enqueued":
            due = e.run_at <= facts.now
            counts = expected[e.workflow_name]
            counts["due" if due else "delayed"] += 1
            if due and (counts["oldest"] is None or e.run_at < counts["oldest"]):
                counts["oldest"] = e.run_at
        elif e.status in ("running", "waiting"):
            expected[e.workflow_name][e.status] += 1
    assert [r["workflow_name"] for r in rows] == sorted(expected)
    for row in rows:
        want = expected[row["workflow_name"]]
        assert (row["due"], row["delayed"], row["running"], row["waiting"]) == (
            want["due"],
            want["delayed"],
            want["running"],
            want["waiting"],
        )
        age = truncated(facts.now - want["oldest"])
        assert age <= row["oldest_due_for"] <= age + timedelta(seconds=5)
    # the seed has both kinds of queue row for billing-sync
    assert expected["billing-sync"]["due"] == 1 and expected["billing-sync"]["delayed"] == 1

    only = run(db, "queue-depth", workflow="remediate")
    assert [r["workflow_name"] for r in only] == ["remediate"]


def test_stuck_leases(db, facts):
    stuck = facts.executions["stuck"]
    rows = run(db, "stuck-leases")
    assert [r["id"] for r in rows] == [stuck.id]
    row = rows[0]
    attempt = facts.attempts_of("stuck")[-1]
    worker = next(w for w in facts.workers if w.worker_id == stuck.owner_id)
    assert row["owner_id"] == "worker-dead"
    assert row["lease_expires"] == stuck.lease_expires
    assert (row["current_step"], row["attempt"], row["step_started_at"]) == (
        attempt.step_id,
        attempt.attempt,
        attempt.started_at,
    )
    assert row["owner_last_heartbeat"] == worker.last_heartbeat
    # Seeded 5 minutes lapsed; the report read it before this statement's now(), whatever the load.
    upper = db.execute("SELECT date_trunc('second', now() - %s)", (stuck.lease_expires,)).fetchone()[0]
    assert timedelta(minutes=5) <= row["expired_for"] <= upper
    # the live lease of "running" is never listed; a grace longer than the lapse hides "stuck"
    assert run(db, "stuck-leases", grace="10 minutes") == []
    assert [r["id"] for r in run(db, "stuck-leases", grace="4 minutes")] == [stuck.id]


def test_pending_approvals(db, facts):
    rows = run(db, "pending-approvals")
    pending = facts.pending_approvals()
    assert [(r["execution_id"], r["step_id"]) for r in rows] == [(w.execution_id, w.step_id) for w in pending]
    assert [r["execution_id"] for r in rows] == [facts.id("pending_approval_old"), facts.id("pending_approval")]
    for row, wait in zip(rows, pending):
        assert row["asked_at"] == wait.created_at
        assert row["deadline"] == wait.wake_at
        assert row["details"] == wait.details
    assert [r["execution_id"] for r in run(db, "pending-approvals", older_than="1 hour")] == [
        facts.id("pending_approval_old")
    ]
    assert run(db, "pending-approvals", workflow="billing-sync") == []


def test_errors_this_month(db, facts):
    rows = run(db, "errors-this-month")
    in_month = sorted(
        (e for e in facts.with_status("error") if e.finished_at > facts.now - timedelta(days=28)),
        key=lambda e: e.finished_at,
        reverse=True,
    )
    assert [r["id"] for r in rows] == [e.id for e in in_month]
    assert [r["id"] for r in rows] == [facts.id("failed_last_hour"), facts.id("failed_recent")]
    for row, e in zip(rows, in_month):
        failed = next(o for o in facts.outputs if o.execution_id == e.id and o.error)
        assert (row["workflow_name"], row["finished_at"], row["error"], row["owner_id"]) == (
            e.workflow_name,
            e.finished_at,
            e.error,
            e.owner_id,
        )
        assert (row["failed_step"], row["attempts"]) == (failed.step_id, failed.attempts)
    assert (rows[1]["failed_step"], rows[1]["attempts"]) == ("fix", 3)

    year = run(db, "errors-this-month", since="1 year")
    assert [r["id"] for r in year] == [
        e.id for e in sorted(facts.with_status("error"), key=lambda e: e.finished_at, reverse=True)
    ]
    assert year[-1]["id"] == facts.id("failed_old")


def test_rejected_fixes(db, facts):
    rows = run(db, "rejected-fixes")
    rejected = facts.wait("rejected", "approve-fix")
    assert len(rows) == 1
    row = rows[0]
    assert (row["execution_id"], row["gate"], row["proposed_by_step"]) == (rejected.execution_id, "approve-fix", "fix")
    assert (row["decision"], row["decided_by"], row["comment"], row["decided_at"]) == (
        "rejected",
        "bob",
        "too risky: it's prod",
        rejected.decided_at,
    )
    assert row["proposed"] == rejected.details

    with_timeouts = run(db, "rejected-fixes", include_timeouts="true")
    timed_out = facts.wait("timed_out", "approve-fix")
    assert [(r["execution_id"], r["decision"], r["decided_by"]) for r in with_timeouts] == [
        (rejected.execution_id, "rejected", "bob"),
        (timed_out.execution_id, "timed_out", None),
    ]
    assert run(db, "rejected-fixes", since="10 minutes") == []


def _expected_slowest(facts: SeedFacts, since: timedelta, workflow: str | None = None) -> list[tuple]:
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for a in facts.attempts:
        if a.finished_at is not None and a.finished_at > facts.now - since:
            if workflow is None or a.workflow_name == workflow:
                groups[(a.workflow_name, a.step_id)].append(a)
    rows = []
    for (wf, step), attempts in groups.items():
        seconds = [a.seconds for a in attempts]
        rows.append(
            (
                wf,
                step,
                len(attempts),
                sum(a.outcome == "error" for a in attempts),
                rounded(percentile(seconds, 0.5)),
                rounded(percentile(seconds, 0.95)),
                rounded(max(seconds)),
            )
        )
    return sorted(rows, key=lambda r: (-r[5], r[0], r[1]))


def test_slowest_steps(db, facts):
    keys = ("workflow_name", "step_id", "attempts", "failed", "p50_s", "p95_s", "max_s")
    rows = [tuple(r[k] for k in keys) for r in run(db, "slowest-steps")]
    expected = _expected_slowest(facts, timedelta(days=1))
    assert rows == expected
    fix = next(r for r in rows if r[:2] == ("remediate", "fix"))
    assert fix[2:4] == (9, 2)  # the 3-day-old failed run is outside the default day

    week = [tuple(r[k] for k in keys) for r in run(db, "slowest-steps", since="7 days", workflow="billing-sync")]
    assert week == _expected_slowest(facts, timedelta(days=7), "billing-sync")
    assert [tuple(r[k] for k in keys) for r in run(db, "slowest-steps", limit="2")] == expected[:2]


def test_throughput(db, facts):
    rows = run(db, "throughput")
    minutes = [r["minute"] for r in rows]
    assert len(rows) == 60
    assert all(b - a == timedelta(minutes=1) for a, b in zip(minutes, minutes[1:]))
    now_minute = facts.now.replace(second=0, microsecond=0)
    assert now_minute <= minutes[-1] <= now_minute + timedelta(minutes=1)

    expected: dict[datetime, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for e in facts.executions.values():
        if e.finished_at is not None and e.finished_at >= minutes[0]:
            expected[e.finished_at.replace(second=0, microsecond=0)][e.status] += 1
    for row in rows:
        want = expected.get(row["minute"], {})
        assert (row["finished"], row["succeeded"], row["failed"], row["cancelled"]) == (
            sum(want.values()),
            want.get("success", 0),
            want.get("error", 0),
            want.get("cancelled", 0),
        )
    assert sum(r["finished"] for r in rows) == 6  # approved, rejected, requeued, quick, failed_last_hour, cancelled
    assert max(r["finished"] for r in rows) == 2  # quick and failed_last_hour finished together
    assert sum(r["finished"] == 0 for r in rows) == 55

    assert len(run(db, "throughput", minutes="5")) == 5


def test_worker_activity(db, facts):
    rows = {r["worker_id"]: r for r in run(db, "worker-activity")}
    assert set(rows) == {w.worker_id for w in facts.workers}
    for worker in facts.workers:
        mine = [e for e in facts.executions.values() if e.owner_id == worker.worker_id]
        finished = [
            e for e in mine if e.status in ("success", "error") and e.finished_at > facts.now - timedelta(hours=1)
        ]
        row = rows[worker.worker_id]
        assert (row["hostname"], row["pid"], row["last_heartbeat"]) == (
            worker.hostname,
            worker.pid,
            worker.last_heartbeat,
        )
        assert row["running_now"] == sum(e.status == "running" for e in mine)
        assert row["finished"] == len(finished)
        assert row["failed"] == sum(e.status == "error" for e in finished)
    assert {k: r["state"] for k, r in rows.items()} == {
        "worker-a": "alive",
        "worker-b": "alive",
        "worker-dead": "silent",
        "worker-old": "stopped",
    }
    assert (rows["worker-b"]["finished"], rows["worker-b"]["failed"]) == (4, 1)

    db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, owner_id, lease_expires) "
        "VALUES ('x', 'running', 'ghost', now() + interval '1 minute')"
    )
    rows = {r["worker_id"]: r for r in run(db, "worker-activity", silent_after="20 minutes")}
    assert (rows["ghost"]["state"], rows["ghost"]["running_now"]) == ("unknown", 1)
    assert rows["worker-dead"]["state"] == "alive"


def _expected_retries(facts: SeedFacts, since: timedelta, min_attempts: int) -> list[tuple]:
    groups: dict[tuple[int, str], list] = defaultdict(list)
    for a in facts.attempts:
        if a.started_at > facts.now - since:
            groups[(a.execution_id, a.step_id)].append(a)
    rows = []
    for (execution_id, step), attempts in groups.items():
        if len(attempts) >= min_attempts:
            last = max(attempts, key=lambda a: a.attempt)
            errors = [a for a in sorted(attempts, key=lambda a: a.attempt) if a.error]
            rows.append(
                (
                    max(a.started_at for a in attempts),
                    execution_id,
                    step,
                    len(attempts),
                    len(errors),
                    last.outcome,
                    errors[-1].error if errors else None,
                )
            )
    rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
    return [r[1:] for r in rows]


def test_retries(db, facts):
    keys = ("execution_id", "step_id", "attempts", "failures", "last_outcome", "last_error")
    rows = [tuple(r[k] for k in keys) for r in run(db, "retries")]
    assert rows == _expected_retries(facts, timedelta(days=7), 2)
    assert {(facts.execution(r[0]).label, r[1]) for r in rows} == {
        ("approved", "fix"),
        ("failed_recent", "fix"),
        ("failed_last_hour", "fetch"),
        ("requeued", "fetch"),
    }
    approved_fix = next(r for r in rows if r[0] == facts.id("approved"))
    assert approved_fix[2:] == (3, 2, "success", "TimeoutError: kubectl timed out")

    three = [tuple(r[k] for k in keys) for r in run(db, "retries", since="1 day", min_attempts="3")]
    assert three == _expected_retries(facts, timedelta(days=1), 3)
    assert [r[0] for r in three] == [facts.id("approved")]


def test_approval_latency(db, facts):
    rows = run(db, "approval-latency")
    decided = [w for w in facts.waits if w.kind == "approval" and w.decision]
    human = [w.decided_at - w.created_at for w in decided if w.decision != "timed_out"]
    seconds = [h.total_seconds() for h in human]
    assert len(rows) == 1
    row = rows[0]
    assert (row["workflow_name"], row["gate"]) == ("remediate", "approve-fix")
    assert (row["decided"], row["approved"], row["rejected"], row["timed_out"]) == (
        len(decided),
        sum(w.decision == "approved" for w in decided),
        sum(w.decision == "rejected" for w in decided),
        sum(w.decision == "timed_out" for w in decided),
    )
    assert row["p50_wait"] == truncated(timedelta(seconds=percentile(seconds, 0.5)))
    assert row["p95_wait"] == truncated(timedelta(seconds=percentile(seconds, 0.95)))
    assert row["max_wait"] == max(human)
    assert (row["p50_wait"], row["p95_wait"]) == (timedelta(minutes=3), timedelta(minutes=3, seconds=54))


def test_operator_actions(db, facts):
    rows = run(db, "operator-actions")
    ordered = sorted(facts.actions, key=lambda a: a.at, reverse=True)
    assert [
        (r["at"], r["actor"], r["action"], r["execution_id"], r["step_id"], r["comment"], r["from_status"])
        for r in rows
    ] == [(a.at, a.actor, a.action, a.execution_id, a.step_id, a.comment, a.from_status) for a in ordered]
    assert [r["action"] for r in run(db, "operator-actions", actor="alice")] == ["cancel", "approve"]


def test_report_result_exports_to_csv(db, facts, tmp_path):
    report = find_report("pending-approvals")
    result = run_report(db, report, bind_params(report, {}))
    out = tmp_path / "pending.csv"
    assert write_csv(result, out) == 2
    with out.open(newline="") as handle:
        header, *body = list(csv.reader(handle))
    assert header == columns(result)
    old = dict(zip(header, body[0]))
    assert old["execution_id"] == str(facts.id("pending_approval_old"))
    assert old["deadline"] == ""  # no deadline: NULL
    assert old["details"] == '{"patch": "failover db-1"}'
    assert datetime.fromisoformat(old["asked_at"]) == facts.wait("pending_approval_old", "approve-fix").created_at


# ---------------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------------


def test_user_report_overrides_shipped_and_says_which_file(db, tmp_path):
    mine = write(tmp_path / "mine", "queue-depth", "-- description: my own\nSELECT 'mine' AS who\n")
    found = discover([tmp_path / "mine"])
    report = found["queue-depth"]
    assert (report.path, report.shipped, report.description) == (mine, False, "my own")
    assert report.overrides == (shipped_dir() / "queue-depth.sql",)
    assert run(db, "queue-depth", [tmp_path / "mine"]) == [{"who": "mine"}]
    assert found["throughput"].shipped  # the others still come from the package


def test_first_user_folder_wins_over_later_ones(tmp_path):
    first = write(tmp_path / "a", "mine", "-- description: from a\nSELECT 1\n")
    second = write(tmp_path / "b", "mine", "-- description: from b\nSELECT 2\n")
    write(tmp_path / "b", "only-b", "SELECT 3\n")
    found = discover([tmp_path / "a", tmp_path / "b"])
    assert (found["mine"].path, found["mine"].description, found["mine"].overrides) == (first, "from a", (second,))
    assert found["only-b"].path == tmp_path / "b" / "only-b.sql"
    assert discover([tmp_path / "b", tmp_path / "a"])["mine"].path == second


def test_missing_user_folder_is_an_error(tmp_path):
    with pytest.raises(ReportError, match="reports folder .*nope does not exist"):
        discover([tmp_path / "nope"])


def test_broken_reports_are_collected_and_keep_their_name(tmp_path):
    write(tmp_path, "queue-depth", "-- colour: red\nSELECT 1\n")
    write(tmp_path, "fine", "SELECT 1\n")
    with pytest.raises(ReportError, match="unknown header key 'colour'"):
        discover([tmp_path])
    broken: list[ReportError] = []
    found = discover([tmp_path], broken=broken)
    assert "fine" in found and "queue-depth" not in found  # no silent fallback to the shipped one
    assert len(broken) == 1 and "queue-depth.sql, line 1" in str(broken[0])


def test_unknown_report_lists_the_available_ones():
    with pytest.raises(ReportNotFound, match="no report named 'nope'; available: .*queue-depth") as info:
        find_report("nope")
    assert isinstance(info.value, KestrelError)


def test_shipped_folder_found_inside_an_installed_package(tmp_path, monkeypatch):
    # pyproject force-includes <repo>/queries as kestrel_console/queries_shipped in the wheel
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert include["queries"] == f"kestrel_console/{reports.SHIPPED_PACKAGE_DIR}"
    assert shipped_dir() == REPO / "queries"  # source checkout: the repo's folder

    installed = tmp_path / "site" / "kestrel_console"
    write(installed / reports.SHIPPED_PACKAGE_DIR, "from-wheel", "SELECT 1\n")
    monkeypatch.setattr(discovery.resources, "files", lambda package: installed)
    assert shipped_dir() == installed / reports.SHIPPED_PACKAGE_DIR
    found = discover()
    assert set(found) == {"from-wheel"} and found["from-wheel"].shipped


# ---------------------------------------------------------------------------------------------
# Header validation
# ---------------------------------------------------------------------------------------------

MALFORMED = {
    "unknown-key": (
        "-- description: d\n-- descripton: typo\nSELECT 1\n",
        "line 2: unknown header key 'descripton': use one of description, param, metric",
    ),
    "param-syntax": (
        "-- description: d\n-- param: since\nSELECT %(since)s::interval\n",
        "line 2: expected '-- param: NAME TYPE [= DEFAULT]', got '-- param: since'",
    ),
    "param-bad-name": ("-- param: 1since interval\nSELECT 1\n", "line 1: expected '-- param: NAME TYPE"),
    "unknown-type": (
        "-- param: since intervall = '1 day'\nSELECT %(since)s::interval\n",
        "line 1: unknown type 'intervall' for parameter 'since': use one of",
    ),
    "duplicate": (
        "-- param: n integer = 1\n-- param: n integer = 2\nSELECT %(n)s::int\n",
        "line 2: parameter 'n' is declared twice (first on line 1)",
    ),
    "undeclared": (
        "-- description: d\n\nSELECT 1\n WHERE x > %(since)s::interval\n",
        "line 4: placeholder %(since)s has no '-- param: since TYPE' line",
    ),
    "unused": (
        "-- param: since interval = '1 day'\n-- param: n integer = 5\nSELECT %(since)s::interval\n",
        "line 2: parameter 'n' is declared but the SQL never uses %(n)s",
    ),
    "empty-body": (
        "-- description: nothing here\n-- param: n integer\n\n-- just a comment\n",
        "the report has no SQL after its header",
    ),
    "bad-default": (
        "-- param: n integer = 'ten'\nSELECT %(n)s::int\n",
        "line 1: the default 'ten' of parameter 'n' is not an integer",
    ),
    "unterminated-default": (
        "-- param: s text = 'abc\nSELECT %(s)s::text\n",
        "line 1: the default of parameter 's' is not a valid SQL literal",
    ),
    "positional": ("SELECT 1\n WHERE x = %s\n", "line 2: positional placeholder %s: name it"),
    "lone-percent": ("SELECT 10 % 3\n", "line 1: a lone '%': write a literal percent sign as %%"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_header_names_file_and_line(tmp_path, case):
    text, message = MALFORMED[case]
    path = write(tmp_path, case, text)
    with pytest.raises(ReportError) as info:
        load_report(path)
    assert str(info.value).startswith(str(path))
    assert message in str(info.value)
    assert isinstance(info.value, KestrelError)


def test_header_parsing(tmp_path):
    path = write(
        tmp_path,
        "full",
        (
            "-- description: First part,\n"
            "-- Some free comment explaining things.\n"
            "--\n"
            "-- description: second part.\n"
            "-- param: since interval = '1 month'\n"
            "-- param: who text = 'o''brien'\n"
            "-- param: n int = 60\n"
            "-- param: flag bool = null\n"
            "-- param: day date\n"
            "\n"
            "-- free header comments are not sent, so 100% here is fine\n"
            "SELECT %(since)s::interval, %(who)s::text, %(n)s::int, %(flag)s::boolean, %(day)s::date,\n"
            "       10 %% 3 AS modulo, %(n)s::int AS again\n"
        ),
    )
    report = load_report(path)
    assert report.name == "full" and report.description == "First part, second part."
    assert [(p.name, p.type, p.default) for p in report.params] == [
        ("since", "interval", "'1 month'"),
        ("who", "text", "'o''brien'"),
        ("n", "integer", "60"),
        ("flag", "boolean", "null"),
        ("day", "date", None),
    ]
    assert [p.default_text for p in report.params] == ["1 month", "o'brien", "60", None, None]
    assert report.sql.startswith("SELECT %(since)s::interval") and "--" not in report.sql


# ---------------------------------------------------------------------------------------------
# Parameter binding
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def typed(tmp_path) -> Report:
    return load_report(
        write(
            tmp_path,
            "typed",
            (
                "-- description: every type\n"
                "-- param: since interval = '1 month'\n"
                "-- param: n integer = 60\n"
                "-- param: big bigint = 5\n"
                "-- param: x numeric = 1.5\n"
                "-- param: f float = 0.25\n"
                "-- param: ok boolean = true\n"
                "-- param: at timestamptz = 'today'\n"
                "-- param: day date = '2024-05-01'\n"
                "-- param: doc jsonb = '{\"a\": [1, 2]}'\n"
                "-- param: who text = null\n"
                "-- param: need text\n"
                "SELECT %(since)s::interval AS since, %(n)s::integer AS n, %(big)s::bigint AS big,\n"
                "       %(x)s::numeric AS x, %(f)s::float8 AS f, %(ok)s::boolean AS ok,\n"
                "       %(at)s::timestamptz AS at, %(day)s::date AS day, %(doc)s::jsonb AS doc,\n"
                "       %(who)s::text AS who, %(need)s::text AS need\n"
            ),
        )
    )


def test_defaults_are_applied_and_converted(typed):
    values = bind_params(typed, {"need": "it"})
    doc = values.pop("doc")
    assert isinstance(doc, Jsonb) and doc.obj == {"a": [1, 2]}
    assert values == {
        "since": "1 month",
        "n": 60,
        "big": 5,
        "x": Decimal("1.5"),
        "f": 0.25,
        "ok": True,
        "at": "today",
        "day": date(2024, 5, 1),
        "who": None,
        "need": "it",
    }


def test_given_values_are_converted_to_their_types(db, typed):
    given = {
        "since": "90 min",
        "n": "-7",
        "big": "9000000000",
        "x": "2.50",
        "f": "1e3",
        "ok": "no",
        "at": "2024-05-01T12:00:00+02:00",
        "day": "2024-02-29",
        "doc": '{"pod": "api-1"}',
        "who": "",
        "need": "x",
    }
    result = run_report(db, typed, bind_params(typed, given))
    row = dict(zip(columns(result), result.rows[0]))
    assert row["since"] == timedelta(minutes=90)
    assert (row["n"], row["big"], row["x"], row["f"], row["ok"]) == (-7, 9_000_000_000, Decimal("2.50"), 1000.0, False)
    assert row["at"] == datetime.fromisoformat("2024-05-01T10:00:00+00:00")
    assert (row["day"], row["doc"], row["who"], row["need"]) == (date(2024, 2, 29), {"pod": "api-1"}, "", "x")


def test_values_may_be_written_as_sql_literals_except_text(typed):
    values = bind_params(typed, {"need": "'quoted'", "since": "'2 days'", "n": "'5'"})
    assert (values["since"], values["n"], values["need"]) == ("2 days", 5, "'quoted'")


def test_unknown_parameter_lists_the_known_ones():
    report = find_report("errors-this-month")
    with pytest.raises(ReportError) as info:
        bind_params(report, {"sinse": "1 day"})
    assert str(info.value) == (
        "report 'errors-this-month' has no parameter 'sinse'; its parameters: "
        "since (interval, default '1 month'), workflow (text, default null)"
    )
    with pytest.raises(ReportError, match="report 'queue-depth' has no parameter 'x'"):
        bind_params(find_report("queue-depth"), {"x": "1"})


def test_missing_required_parameter(typed):
    with pytest.raises(ReportError) as info:
        bind_params(typed, {})
    assert str(info.value) == "report 'typed' needs parameter 'need' (text): give it as --param need=VALUE"


@pytest.mark.parametrize(
    "name, value, expects",
    [
        ("since", "abc", "an interval"),
        ("since", "1 fortnight", "an interval"),
        ("n", "ten", "an integer"),
        ("n", "1.5", "an integer"),
        ("n", "99999999999", "an integer"),
        ("x", "1,5", "a number"),
        ("f", "fast", "a number"),
        ("ok", "maybe", "a boolean"),
        ("at", "noonish", "a timestamp"),
        ("day", "2024-02-30", "a date"),
        ("doc", "{pod: 1}", "a JSON value"),
    ],
)
def test_wrong_type_is_refused_with_a_clear_message(typed, name, value, expects):
    with pytest.raises(ReportError) as info:
        bind_params(typed, {"need": "x", name: value})
    assert str(info.value).startswith(f"parameter {name!r} of report 'typed' expects {expects}, got {value!r}")


def test_interval_postgres_refuses_is_reported_like_the_others(db):
    report = find_report("errors-this-month")
    values = bind_params(report, {"since": "99999999999 years"})  # looks like an interval
    with pytest.raises(ReportError) as info:
        run_report(db, report, values)
    assert str(info.value).startswith(
        "parameter 'since' of report 'errors-this-month' expects an interval, got '99999999999 years'"
    )


@pytest.mark.parametrize(
    "text",
    [
        "1 month",
        "2 days 3 hours",
        "90min",
        "01:30:00",
        "1 day 02:00",
        "@ 1 hour ago",
        "P1DT2H",
        "-5 minutes",
        "1.5 weeks",
        "3 mons",
    ],
)
def test_intervals_postgres_accepts_pass_and_mean_the_same(db, text):
    report = find_report("errors-this-month")
    values = bind_params(report, {"since": text})
    assert values["since"] == text
    expected = db.execute("SELECT %s::interval", (text,)).fetchone()[0]
    assert db.execute("SELECT %(since)s::interval", values).fetchone()[0] == expected
    run_report(db, report, values)  # runs


def test_values_are_bound_never_pasted(db, facts):
    # A quote in a value is data: it can neither break the SQL nor inject into it.
    db.execute(
        "INSERT INTO operator_actions (actor, action, execution_id, comment) VALUES ('o''brien', 'cancel', 1, 'quoted')"
    )
    assert [r["comment"] for r in run(db, "operator-actions", actor="o'brien")] == ["quoted"]
    assert run(db, "operator-actions", actor="x' OR '1'='1") == []
    assert run(db, "errors-this-month", workflow="'; DELETE FROM workflow_executions; --") == []
    assert run(db, "queue-depth", workflow="remediate' OR 'a'='a") == []
    count = db.execute("SELECT count(*) FROM workflow_executions").fetchone()[0]
    assert count == len(facts.executions)


def test_literal_percent_and_reused_placeholder(db, tmp_path):
    write(tmp_path, "mod", "-- param: n integer = 10\nSELECT %(n)s::int %% 3 AS m, %(n)s::int * 2 AS twice\n")
    assert run(db, "mod", [tmp_path]) == [{"m": 1, "twice": 20}]
    assert run(db, "mod", [tmp_path], n="7") == [{"m": 1, "twice": 14}]


# ---------------------------------------------------------------------------------------------
# Read-only guard
# ---------------------------------------------------------------------------------------------

WRITERS = {
    "delete": "-- description: sneaky\nDELETE FROM workflow_executions\n",
    "cte-delete": "WITH d AS (DELETE FROM workflow_executions RETURNING id) SELECT count(*) FROM d\n",
    "update": "UPDATE workflow_executions SET status = 'cancelled'\n",
    "select-then-drop": "SELECT 1; DROP TABLE workers\n",
    "writing-function": "-- param: id bigint\nSELECT cancel_execution(%(id)s::bigint, 'mallory', 'via report')\n",
}


@pytest.mark.parametrize("case", sorted(WRITERS))
def test_a_report_that_writes_is_refused(db, facts, tmp_path, case):
    write(tmp_path, case, WRITERS[case])
    report = find_report(case, [tmp_path])
    given = {"id": str(facts.id("running"))} if report.params else {}
    with pytest.raises(KestrelError):
        run_report(db, report, bind_params(report, given))
    statuses = dict(db.execute("SELECT id, status FROM workflow_executions").fetchall())
    assert statuses == {e.id: e.status for e in facts.executions.values()}
    assert db.execute("SELECT count(*) FROM workers").fetchone()[0] == len(facts.workers)
    assert db.execute("SELECT count(*) FROM operator_actions").fetchone()[0] == len(facts.actions)
