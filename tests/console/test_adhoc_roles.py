"""Ad-hoc SQL under the operator and reader roles (moved from tests/core/test_roles.py: the
engine's tests do not import the console, issue 11)."""

from __future__ import annotations

import psycopg
import pytest

from kestrel_console.adhoc import QueryFailed, QueryRefused, run_read_only
from kestrel_core import Kestrel
from tests.core.test_roles import Logins, logins  # noqa: F401 (the fixture)


def test_console_adhoc_sql_works_under_the_operator_role(logins: Logins, app: Kestrel, db: psycopg.Connection) -> None:
    app.enqueue("report-me", {"x": 1})
    db.execute("DROP TABLE IF EXISTS public.payroll")
    db.execute("CREATE TABLE public.payroll (who text)")
    with psycopg.connect(logins.operator_dsn, autocommit=True) as conn:
        # Issue 44: ad-hoc SQL runs only as the reader role; these roles have other names.
        with pytest.raises(QueryRefused, match=r"may not assume role kestrel_reader \(ask an admin for: GRANT"):
            run_read_only(conn, "SELECT workflow_name, status FROM workflow_executions", schema="kestrel")
        with pytest.raises(QueryRefused, match="relation public.payroll: only the Kestrel schema"):
            run_read_only(conn, "SELECT * FROM public.payroll", schema="kestrel", reader_role=logins.names.reader)
        # An operator login may assume the reader role (its role is a member): no note then.
        as_reader = run_read_only(
            conn, "SELECT current_user::text, count(*) FROM workflow_executions", reader_role=logins.names.reader
        )
        assert as_reader.rows == [(logins.names.reader, 1)] and as_reader.notice is None
        with pytest.raises(QueryFailed) as failed:  # layer 1 bypassed: the reader may not act
            run_read_only(
                conn, "SELECT kestrel.cancel_execution(1, 'mallory', 'x')", check=False, reader_role=logins.names.reader
            )
        assert failed.value.sqlstate == "42501"
