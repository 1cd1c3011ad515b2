"""``list --where FILTER``: the console's filter language from the shell (issue 46), the same
rows as the TUI's filter; a bad filter, or a key given twice, is exit 2 with one line saying why."""

from __future__ import annotations

import psycopg
import pytest

from kestrel_console.read import Reader
from kestrel_console.read.search import parse_filter
from tests.cli.test_read_commands import as_json, facts, run  # noqa: F401 (fixtures)
from tests.seed import SeedFacts


@pytest.mark.parametrize(
    "where",
    ["status:error", "workflow:billing since:2h", "upstream", "status:success until:1h", "input.pod=api-1"],
)
def test_where_lists_what_the_reader_selects(run, dsn, facts: SeedFacts, where: str) -> None:
    with Reader(dsn) as reader:
        expected = [r["id"] for r in reader.list_executions(where=parse_filter(where), limit=50)]
    assert [r["id"] for r in as_json(run("list", "--where", where, "--format", "json"))] == expected


def test_where_by_id_and_idempotency_key(run, db: psycopg.Connection, facts: SeedFacts) -> None:
    quick = facts.id("quick")
    assert [r["id"] for r in as_json(run("list", "--where", f"id:{quick}", "--format", "json"))] == [quick]
    (keyed,) = db.execute(
        "INSERT INTO workflow_executions (workflow_name, idempotency_key) VALUES ('keyed', 'order-7') RETURNING id"
    ).fetchone()
    assert [r["id"] for r in as_json(run("list", "--where", "key:order-7", "--format", "json"))] == [keyed]
    assert as_json(run("list", "--where", "key:order-8", "--format", "json")) == []


def test_where_beside_status_and_workflow(run, facts: SeedFacts) -> None:
    both = as_json(run("list", "--where", "since:30d", "--status", "error", "--format", "json"))
    assert both and all(r["status"] == "error" for r in both)
    clash = run("list", "--where", "status:success", "--status", "error")
    assert clash.returncode == 2 and "--where says status:success, --status error: give one" in clash.stderr


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("since:2x", "write the span as 90s"),
        ("id:abc", "an execution id is a positive number"),
        ("status:nope", "unknown status"),
    ],
)
def test_a_bad_filter_is_exit_2_saying_how_to_write_it(run, where: str, says: str) -> None:
    result = run("list", "--where", where)
    assert result.returncode == 2 and says in result.stderr and result.stdout == ""
    assert "Traceback" not in result.stderr
