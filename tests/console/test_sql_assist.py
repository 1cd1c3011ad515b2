"""The SQL editor's sqlglot helpers (issue 46, finding 9): formatting keeps what a query says
(PostgreSQL's own parser agrees on the statements before and after), completion offers the
live schema's names: tables first, then the columns of the tables the query reads, after
``alias.`` that table's columns only."""

from __future__ import annotations

import pglast
import pytest

from kestrel_console.tui.sql_assist import FormatError, SchemaNames, complete, format_sql, tables_in

NAMES = SchemaNames(
    {
        "workflow_executions": ["id", "workflow_name", "status", "created_at"],
        "workflow_waits": ["execution_id", "step_id", "wake_at"],
        "operator_actions": ["id", "actor", "action"],
    }
)


@pytest.mark.parametrize(
    "query",
    [
        "select status, count(*) from workflow_executions group by status order by 2 desc",
        "SELECT w.step_id FROM workflow_waits w JOIN workflow_executions e ON e.id = w.execution_id"
        " WHERE e.status = 'waiting'",
        "select 1; select 2;",
        "select id from workflow_executions where created_at > now() - interval '2 hours' limit 5",
    ],
)
def test_formatting_keeps_the_statements(query: str) -> None:
    formatted = format_sql(query)
    assert formatted != query and formatted.endswith("\n")
    assert len(pglast.parse_sql(formatted)) == len(pglast.parse_sql(query))
    assert format_sql(formatted) == formatted  # formatting twice changes nothing


def test_what_sqlglot_cannot_parse_is_refused_not_mangled() -> None:
    with pytest.raises(FormatError, match="Expected table name"):
        format_sql("select * from")
    assert format_sql("   ") == "   "


def test_completion_tables_then_columns() -> None:
    assert complete("SELECT * FROM workflow_e", NAMES).insert == "xecutions"
    both = complete("SELECT * FROM workflow_", NAMES)
    assert both.insert == "" and both.candidates[:2] == ["workflow_executions", "workflow_waits"]
    assert complete("SELECT * FROM workflow_executions WHERE stat", NAMES).insert == "us"
    # after alias., the columns of its table only (the FROM is after the cursor)
    whole = "SELECT w.ste FROM workflow_waits w"
    assert complete("SELECT w.ste", NAMES, whole=whole).candidates == ["step_id"]
    assert complete("SELECT x.", NAMES, whole="SELECT x. FROM operator_actions AS x").candidates == [
        "id",
        "actor",
        "action",
    ]
    assert complete("SELECT zzz", NAMES).candidates == []


def test_tables_in_a_query_being_typed() -> None:
    assert tables_in("SELECT * FROM workflow_waits w JOIN workflow_executions e ON") == {
        "workflow_waits": "workflow_waits",
        "w": "workflow_waits",
        "workflow_executions": "workflow_executions",
        "e": "workflow_executions",
    }
