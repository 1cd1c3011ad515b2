"""The metrics endpoint under a real Prometheus (Debian's package, started on loopback): it
scrapes the endpoint and its query API returns the queue depth the tables hold; the shipped
alert rules pass ``promtool check rules`` and their unit tests; every metric the Grafana
dashboard, the rules and docs/metrics.md name is one the endpoint exposes, and the dashboard's
queries are valid PromQL for Prometheus itself."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from kestrel_console.metrics import build_collector, serve
from kestrel_console.metrics.collector import replica_families
from kestrel_console.read.replica import ReplicaState
from kestrel_console.settings import Settings
from kestrel_core import Kestrel
from tests.console.metrics.prometheus_server import prometheus, promtool
from tests.readme_blocks import ROOT
from tests.waiting import wait_for

ALERTS = ROOT / "docs" / "prometheus" / "alerts.yml"
ALERT_TESTS = ROOT / "docs" / "prometheus" / "alerts_test.yml"
DASHBOARD = ROOT / "docs" / "grafana" / "kestrel-dashboard.json"
METRICS_DOC = ROOT / "docs" / "metrics.md"
NAME = re.compile(r"\bkestrel_[a-z_]+\b")
# Names of that shape that are not metrics: the roles of docs/operations.md, the packages.
NOT_METRICS = {"kestrel_reader", "kestrel_operator", "kestrel_worker", "kestrel_core", "kestrel_console"}
ODD_NAME = 'ingest "v2" \\ {x="1"} ünïcode'
# What prometheus_client appends to a family's name in the samples it writes.
SUFFIXES = ("", "_total", "_created", "_bucket", "_count", "_sum")


def depth_in_tables(db: psycopg.Connection) -> dict[tuple[tuple[str, str], ...], float]:
    rows = db.execute(
        "SELECT queue, workflow_name, count(*) FROM kestrel.workflow_executions WHERE status = 'enqueued' GROUP BY 1, 2"
    ).fetchall()
    return {(("queue", q), ("workflow", w)): float(n) for q, w, n in rows}


def test_prometheus_scrapes_the_queue_depth_the_tables_hold(
    app: Kestrel, db: psycopg.Connection, dsn: str, reader_dsn: str, tmp_path: Path
) -> None:
    for i in range(7):
        app.enqueue("ingest", {"n": i}, queue="bulk")
    app.enqueue("ingest", {"n": 99}, queue="bulk", delay=timedelta(hours=1))  # enqueued, not due
    app.enqueue("remediate", {"pod": "api-1"})
    app.enqueue(ODD_NAME, 1)  # quotes, a backslash, braces, non-ASCII: a label as it is
    # The reader login, as an operator would configure it (--reader-dsn).
    endpoint = serve(Settings(dsn=dsn, reader_dsn=reader_dsn), "127.0.0.1:0", settle_s=0)
    try:
        with prometheus(tmp_path, f"127.0.0.1:{endpoint.port}") as prom:
            expected = depth_in_tables(db)
            assert expected == {
                (("queue", "bulk"), ("workflow", "ingest")): 8.0,
                (("queue", "default"), ("workflow", "remediate")): 1.0,
                (("queue", "default"), ("workflow", ODD_NAME)): 1.0,
            }
            wait_for(lambda: prom.values("kestrel_queue_depth") == expected, timeout=30, what="the depth scraped")
            assert prom.values("kestrel_queue_due") == {**expected, (("queue", "bulk"), ("workflow", "ingest")): 7.0}
            assert prom.values("kestrel_up") == {(): 1.0}

            # The depth follows the tables: more enqueued, one cancelled.
            for i in range(5):
                app.enqueue("ingest", {"n": 100 + i}, queue="bulk")
            app.cancel(app.enqueue("remediate", {"pod": "api-2"}), by="test")
            expected = depth_in_tables(db)
            assert expected[(("queue", "bulk"), ("workflow", "ingest"))] == 13.0
            wait_for(lambda: prom.values("kestrel_queue_depth") == expected, timeout=30, what="the new depth scraped")
            wait_for(
                lambda: (
                    prom.values('kestrel_history_executions{status="cancelled"}')
                    == {(("status", "cancelled"), ("workflow", "remediate")): 1.0}
                ),
                timeout=30,
                what="the cancelled execution counted",
            )

            # Every query of the shipped dashboard is valid PromQL and runs.
            for expr in dashboard_queries():
                answer = prom.query(expr.replace("$job", ".*"))
                assert answer["status"] == "success", (expr, answer)
            due = db.execute(
                "SELECT count(*) FROM kestrel.workflow_executions WHERE status = 'enqueued' AND run_at <= now()"
            ).fetchone()[0]
            assert due == 14
            assert prom.values('max without (instance) (sum by (job) (kestrel_queue_due{job=~".*"}))') == {(): 14.0}
    finally:
        endpoint.close()


def test_promtool_accepts_the_alert_rules_and_their_unit_tests_pass() -> None:
    checked = promtool("check", "rules", str(ALERTS))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout
    tested = promtool("test", "rules", str(ALERT_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert len(queries) >= len(dashboard["panels"]) > 10
    return queries


@pytest.fixture
def exposed(app: Kestrel, dsn: str) -> set[str]:
    """The metric families the endpoint writes, on a database with a finished execution."""
    collector, reader, reports = build_collector(Settings(dsn=dsn), settle_s=0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        text = generate_latest(registry).decode()
    finally:
        reader.close()
        reports.close()
    # The replica's gauges appear only when the endpoint reads a replica (--read-dsn).
    replica = {family.name for family in replica_families(ReplicaState(replica=True))}
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M)) | replica


def _known(name: str, families: set[str]) -> bool:
    return any(name == family + suffix or name + suffix == family for family in families for suffix in SUFFIXES)


def test_the_dashboard_rules_and_docs_name_only_metrics_the_endpoint_exposes(exposed: set[str]) -> None:
    builtin = {f for f in exposed if not f.startswith(("kestrel_report_", "kestrel_reports_"))}
    assert {"kestrel_up", "kestrel_queue_depth", "kestrel_step_duration_seconds", "kestrel_workers"} <= builtin
    dashboard = " ".join(dashboard_queries())
    for source, text in (
        ("dashboard", dashboard),
        ("alerts.yml", ALERTS.read_text()),
        ("metrics.md", METRICS_DOC.read_text()),
    ):
        unknown = sorted(
            {
                n
                for n in NAME.findall(text)
                if not _known(n, exposed) and not n.startswith("kestrel_report_") and n not in NOT_METRICS
            }
        )
        assert not unknown, f"{source} names metrics the endpoint does not expose: {unknown}"
    # ... and each exposed family is documented, and shown on the dashboard or alerted on.
    documented = set(NAME.findall(METRICS_DOC.read_text()))
    assert not sorted(
        f for f in builtin if not any(f + s in documented or f == d for d in documented for s in SUFFIXES)
    )
    used = set(NAME.findall(dashboard + ALERTS.read_text()))
    unused = sorted(f for f in builtin if not any(_known(u, {f}) for u in used))
    assert not unused, f"exposed but on no dashboard panel nor alert: {unused}"
