"""The audit trail (issue 47, "an audit screen"): ``kestrel-console audit [FILTER]`` and
``Reader.audit`` read every operator action, newest first, filtered by action, operator,
execution, age and free text, a page at a time."""

from __future__ import annotations

import json

import psycopg
import pytest

from kestrel_console.read.audit import AuditFilter, AuditFilterError, parse_audit_filter
from kestrel_console.read.reader import Reader
from kestrel_core import Kestrel
from tests.cli.script import console


def _acted(app: Kestrel, db: psycopg.Connection) -> list[int]:
    """Three executions acted on by two operators: cancels, a requeue, a pause."""
    ids = [app.enqueue("audited", {"n": n}) for n in range(3)]
    app.cancel(ids[0], by="alice", comment="wrong region")
    app.requeue(ids[0], by="bob", comment="deploy fixed it")
    app.pause(ids[1], by="alice", comment="hold for the freeze")
    app.cancel(ids[2], by="bob")
    return ids


def test_the_audit_lists_filters_and_pages_every_action(app: Kestrel, db: psycopg.Connection, dsn: str) -> None:
    ids = _acted(app, db)
    out = console("audit", "--format", "json", dsn=dsn)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [(r["action"], r["actor"], r["execution_id"]) for r in rows] == [
        ("cancel", "bob", ids[2]),
        ("pause", "alice", ids[1]),
        ("requeue", "bob", ids[0]),
        ("cancel", "alice", ids[0]),
    ]
    assert rows[1]["comment"] == "hold for the freeze" and rows[0]["db_user"]

    def actions(*args: str) -> list[tuple[str, str]]:
        done = console("audit", *args, "--format", "json", dsn=dsn)
        assert done.returncode == 0, done.stderr
        return [(r["action"], r["actor"]) for r in json.loads(done.stdout)]

    assert actions("action:cancel") == [("cancel", "bob"), ("cancel", "alice")]
    assert actions("by:alice") == [("pause", "alice"), ("cancel", "alice")]
    assert actions(f"id:{ids[0]}") == [("requeue", "bob"), ("cancel", "alice")]
    assert actions("DEPLOY") == [("requeue", "bob")]  # free text, any case, in the comment
    assert actions("since:1h action:pause") == [("pause", "alice")]
    assert actions("action:approve") == []
    # Paging back by id: the next page starts below the last id shown.
    first = json.loads(console("audit", "--limit", "2", "--format", "json", dsn=dsn).stdout)
    rest = json.loads(console("audit", "--before", str(first[-1]["id"]), "--format", "json", dsn=dsn).stdout)
    assert [r["id"] for r in first + rest] == [r["id"] for r in rows]

    table = console("audit", "nothing-matches-this", dsn=dsn)
    assert table.returncode == 0 and "no operator action matches" in table.stdout


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("action:", "action: needs a value"),
        ("id:abc", "id:abc is not an execution id"),
        ("since:soon", "write the span as"),
        ("by:a by:b", "by: given twice"),
        ("by:'unclosed", "close the quote"),
        ("action:dr0p", "is not an action name"),
    ],
)
def test_a_filter_it_cannot_read_is_one_line_and_exit_2(dsn: str, text: str, said: str) -> None:
    with pytest.raises(AuditFilterError, match=said.split(":")[0]):
        parse_audit_filter(text)
    out = console("audit", text, dsn=dsn)
    assert out.returncode == 2 and said in " ".join(out.stderr.split())


def test_a_filter_reads_back_as_itself() -> None:
    f = parse_audit_filter("action:cancel by:'Ann Lee' id:7 since:2h deploy fix")
    assert f == AuditFilter(action="cancel", actor="Ann Lee", execution_id=7, since_s=7200.0, text="deploy fix")
    assert parse_audit_filter(str(f)) == f


def test_the_reader_pages_back_by_id(app: Kestrel, db: psycopg.Connection, dsn: str) -> None:
    _acted(app, db)
    with Reader(dsn) as reader:
        page = reader.audit(limit=3)
        older = reader.audit(limit=3, before_id=page[-1]["id"])
    assert len(page) == 3 and len(older) == 1 and older[0]["id"] < page[-1]["id"]
