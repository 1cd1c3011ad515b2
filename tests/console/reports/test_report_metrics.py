"""A saved report that declares itself a metric (``-- metric: gauge ...``): the header is
parsed or refused with the file and line; at a scrape it is a gauge read on the reader login;
a report that fails exports nothing and ``kestrel_reports_up 0``, the others still export."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.registry import CollectorRegistry

from kestrel_console.metrics import ReportGauges
from kestrel_console.reports import ReportError, ReportMetric, discover, load_report
from kestrel_console.settings import Settings
from kestrel_core import Kestrel
from tests.readme_blocks import blocks
from tests.waiting import wait_for


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.sql"
    path.write_text(text, encoding="utf-8")
    return path


def test_metric_lines_are_parsed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "depth",
        "-- description: depth\n"
        "-- metric: gauge kestrel_report_depth value=n labels=workflow_name,queue\n"
        "-- metric: gauge kestrel_report_last\n"
        "-- param: since interval = '1 hour'\n"
        "SELECT workflow_name, queue, count(*) AS n FROM workflow_executions "
        "WHERE created_at > now() - %(since)s::interval GROUP BY 1, 2\n",
    )
    report = load_report(path)
    assert report.metrics == (
        ReportMetric("gauge", "kestrel_report_depth", "n", ("workflow_name", "queue")),
        ReportMetric("gauge", "kestrel_report_last", None, ()),
    )
    assert load_report(write(tmp_path, "plain", "SELECT 1\n")).metrics == ()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("counter kestrel_report_x", "a report can only be a gauge"),
        ("gauge", "expected '-- metric: gauge kestrel_report_NAME"),
        ("gauge kestrel_queue_depth", "starting with 'kestrel_report_'"),
        ("gauge kestrel_report_", "starting with 'kestrel_report_'"),
        ("gauge kestrel_report_a-b", "give a Prometheus name"),
        ("gauge kestrel_report_x colour=red", "unexpected 'colour=red'"),
        ("gauge kestrel_report_x value=a value=b", "unexpected 'value=b'"),
        ("gauge kestrel_report_x value=a,b", "give one column"),
        ("gauge kestrel_report_x labels=", "give column names"),
        ("gauge kestrel_report_x labels=a,a", "a column is named twice"),
        ("gauge kestrel_report_x labels=a;b", "give column names"),
        ("gauge kestrel_report_x value=a labels=a", "both the value and a label"),
    ],
)
def test_bad_metric_lines_are_refused_with_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, "r", f"-- description: x\n-- metric: {line}\nSELECT 1 AS a, 2 AS b\n")
    with pytest.raises(ReportError, match="line 2: ") as caught:
        load_report(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_a_metric_declared_twice_or_a_parameter_without_default_is_refused(tmp_path: Path) -> None:
    twice = write(tmp_path, "twice", "-- metric: gauge kestrel_report_x\n-- metric: gauge kestrel_report_x\nSELECT 1\n")
    with pytest.raises(ReportError, match="line 2: metric 'kestrel_report_x' is declared twice"):
        load_report(twice)
    required = write(
        tmp_path, "required", "-- param: n integer\n-- metric: gauge kestrel_report_y\nSELECT %(n)s::integer AS v\n"
    )
    with pytest.raises(ReportError, match="line 1: parameter 'n' has no default, but the report declares a metric"):
        load_report(required)


@given(
    st.text(
        alphabet=st.characters(
            blacklist_categories=("Cs",), blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
        ),
        max_size=60,
    )
)
def test_any_metric_line_is_parsed_or_refused_with_a_report_error(
    tmp_path_factory: pytest.TempPathFactory, line: str
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    path = write(folder, "r", f"-- metric: {line}\nSELECT 1 AS v\n")
    try:
        report = load_report(path)
    except ReportError as exc:
        assert "line 1" in str(exc)
        return
    for metric in report.metrics:
        assert metric.kind == "gauge" and metric.name.startswith("kestrel_report_")


# -- at a scrape --------------------------------------------------------------------------------


def samples(gauges: ReportGauges) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)

    class One:
        def collect(self):  # type: ignore[no-untyped-def]
            return gauges()

    registry.register(One())  # type: ignore[arg-type]
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in registry.collect() for s in family.samples}


def test_a_report_is_a_gauge_read_on_the_reader_login_and_a_failing_one_exports_nothing(
    app: Kestrel, db: psycopg.Connection, dsn: str, reader_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(3):
        app.enqueue("ingest", i)
    app.enqueue("remediate", 1)
    folder = tmp_path / "reports"
    write(
        folder,
        "by-workflow",
        "-- description: enqueued per workflow\n"
        "-- metric: gauge kestrel_report_enqueued value=n labels=workflow_name\n"
        "-- metric: gauge kestrel_report_enqueued_ids labels=workflow_name\n"
        "SELECT workflow_name, count(*) AS n, sum(id) AS ids FROM workflow_executions "
        "WHERE status = 'enqueued' GROUP BY 1 ORDER BY 1\n",
    )
    write(folder, "text-value", "-- metric: gauge kestrel_report_bad\nSELECT 'x' AS v\n")
    write(folder, "no-column", "-- metric: gauge kestrel_report_nc value=nope\nSELECT 1 AS v\n")
    write(
        folder,
        "duplicate",
        "-- metric: gauge kestrel_report_dup labels=w\nSELECT 'a' AS w, 1 AS v UNION ALL SELECT 'a', 2\n",
    )
    write(folder, "slow", "-- metric: gauge kestrel_report_slow\nSELECT 1 AS v FROM pg_sleep(3)\n")
    write(folder, "writes", "-- metric: gauge kestrel_report_w\nDELETE FROM workflow_executions RETURNING 1\n")
    write(folder, "shadow", "-- metric: gauge kestrel_report_enqueued\nSELECT 1 AS v\n")
    # The reader login: the superuser the tests run as is refused for user reports, as for `report`.
    gauges = ReportGauges(Settings(dsn=dsn, reader_dsn=reader_dsn, queries=[folder]), timeout_ms=500)
    try:
        s = samples(gauges)
    finally:
        gauges.close()
    ids = dict(db.execute("SELECT workflow_name, sum(id) FROM kestrel.workflow_executions GROUP BY 1").fetchall())
    assert s[("kestrel_report_enqueued", (("workflow_name", "ingest"),))] == 3
    assert s[("kestrel_report_enqueued", (("workflow_name", "remediate"),))] == 1
    assert s[("kestrel_report_enqueued_ids", (("workflow_name", "ingest"),))] == ids["ingest"]
    up = {dict(labels)["report"]: v for (name, labels), v in s.items() if name == "kestrel_reports_up"}
    assert up["by-workflow"] == 1
    for broken in ("text-value", "no-column", "duplicate", "slow", "writes", "shadow"):
        assert up[broken] == 0, broken
    assert not [
        k for k in s if k[0] in ("kestrel_report_bad", "kestrel_report_nc", "kestrel_report_dup", "kestrel_report_slow")
    ]
    assert ("kestrel_report_enqueued", ()) not in s  # the shadowing report's sample is not there
    log = capsys.readouterr().err
    assert "report 'text-value': metric kestrel_report_bad: column v holds str, not a number" in log
    assert "report 'no-column': metric kestrel_report_nc: the result has no column nope" in log
    assert "report 'duplicate': metric kestrel_report_dup: two rows have the same labels {'w': 'a'}" in log
    assert "report 'shadow': metric kestrel_report_enqueued is declared by report 'by-workflow' too" in log
    assert "report 'slow':" in log and "report 'writes':" in log


def test_the_shipped_approval_gates_report_is_a_gauge() -> None:
    report = discover()["approval-gates"]
    assert report.shipped
    assert [m.name for m in report.metrics] == [
        "kestrel_report_approval_gates_waiting",
        "kestrel_report_approval_gates_oldest_seconds",
    ]


def test_the_docs_example_report_is_a_gauge_as_written(app: Kestrel, dsn: str, reader_dsn: str, tmp_path: Path) -> None:
    (example,) = blocks("Saved reports as gauges", "sql", "docs/metrics.md")
    folder = tmp_path / "reports"
    write(folder, "gates", example)
    assert load_report(folder / "gates.sql").metrics[0].labels == ("workflow_name", "gate")

    @app.workflow("remediate")
    def remediate(ctx, x):  # type: ignore[no-untyped-def]
        ctx.wait_for_approval("approve-fix")

    worker = app.worker(concurrency=2, poll_interval=0.1)
    worker.start()
    try:
        for i in range(2):
            app.enqueue("remediate", i)
        gauges = ReportGauges(Settings(dsn=dsn, reader_dsn=reader_dsn, queries=[folder]), timeout_ms=2000)
        try:
            key = ("kestrel_report_approval_gates_waiting", (("gate", "approve-fix"), ("workflow_name", "remediate")))
            wait_for(lambda: samples(gauges).get(key) == 2, what="two gates waiting, as a gauge")
        finally:
            gauges.close()
    finally:
        worker.stop(grace=timedelta(0))
