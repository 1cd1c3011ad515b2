"""Benchmark databases beside other work: their drops handed on, none forced on the server."""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict

from bench.databases import drop_database, fresh_database, sharing_the_server
from tests.conftest import ADMIN_DSN, DATABASE_EXISTS, drop_at_the_end


def _exists(dsn: str) -> bool:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as conn:
        return conn.execute(DATABASE_EXISTS, (conninfo_to_dict(dsn)["dbname"],)).fetchone() is not None


def test_a_database_shared_with_other_work_is_handed_on_not_dropped() -> None:
    handed: list[str] = []
    with sharing_the_server(handed.append), fresh_database(ADMIN_DSN, kestrel=False) as dsn:
        assert _exists(dsn)
    drop_at_the_end(dsn)
    assert handed == [dsn] and _exists(dsn)


def test_sharing_ends_with_its_block_and_restores_an_outer_one() -> None:
    """(Every test here runs inside the suite's own ``sharing_the_server``: tests/bench/conftest.py.)"""
    outer: list[str] = []
    inner: list[str] = []
    with sharing_the_server(outer.append):
        with sharing_the_server(inner.append):
            drop_database(ADMIN_DSN, "dbname=one")
        drop_database(ADMIN_DSN, "dbname=two")
    assert inner == ["dbname=one"] and outer == ["dbname=two"]
