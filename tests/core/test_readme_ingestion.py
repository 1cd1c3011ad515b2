"""The examples of docs/ingestion.md, run as written (issue 21)."""

from __future__ import annotations

import psycopg
import pytest

from tests.readme_blocks import blocks


def test_readme_ingestion_examples_as_written(
    dsn: str, db: psycopg.Connection, monkeypatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outbox, client = blocks("Ingestion", "python", doc="docs/ingestion.md")
    monkeypatch.setenv("KESTREL_DSN", dsn)
    db.execute("DROP TABLE IF EXISTS public.orders")
    scope: dict = {"__name__": "readme_outbox"}
    exec(compile(outbox, "docs/ingestion.md (outbox)", "exec"), scope)
    scope["app"].close()
    assert capsys.readouterr().out.splitlines() == ["enqueued 1", "True"]
    # What the example committed: order 1 and its execution; nothing of the rolled-back order 2.
    assert db.execute("SELECT id FROM public.orders").fetchall() == [(1,)]
    assert db.execute("SELECT idempotency_key, input FROM workflow_executions ORDER BY id").fetchall() == [
        ("ship:1", {"order": 1})
    ]
    exec(compile(client, "docs/ingestion.md (async client)", "exec"), {"__name__": "readme_async"})
    assert capsys.readouterr().out.splitlines() == ["100 executions", "enqueued"]
    assert db.execute("SELECT count(*) FROM workflow_executions").fetchone()[0] == 102
    assert db.execute("SELECT id FROM public.orders ORDER BY id").fetchall() == [(1,), (3,)]
