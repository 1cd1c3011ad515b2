"""Every shipped report runs on the partitioned history (migration 0022) with rows in more than
one id range: the parents keep their names, so the reports' SQL is unchanged."""

from __future__ import annotations

import functools

from psycopg import sql

from kestrel_console.reports import bind_params, load_report, run_report, shipped_dir
from tests.seed import seed_history

run_shipped = functools.partial(run_report, schema="kestrel")


def test_every_shipped_report_runs_across_partitions(db) -> None:
    seed_history(db)  # in the first range
    second = db.execute("SELECT lo FROM history_partitions ORDER BY lo OFFSET 1 LIMIT 1").fetchone()[0]
    db.execute(sql.SQL("ALTER TABLE workflow_executions ALTER COLUMN id RESTART WITH {}").format(sql.Literal(second)))
    db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, started_at, finished_at, error)"
        " VALUES ('later', 'error', now() - interval '1 minute', now(), 'boom')"
    )
    spread = db.execute(
        "SELECT count(DISTINCT tableoid) FROM workflow_executions WHERE workflow_name IN ('later') OR id < %s",
        (second,),
    ).fetchone()[0]
    assert spread == 2
    paths = sorted(shipped_dir().glob("*.sql"))
    assert len(paths) >= 13
    for path in paths:
        report = load_report(path, shipped=True)
        result = run_shipped(db, report, bind_params(report, {}))
        assert result.columns, report.name
    errors = load_report(shipped_dir() / "errors-this-month.sql", shipped=True)
    found = run_shipped(db, errors, bind_params(errors, {}))
    assert any("later" in map(str, row) for row in found.rows)
