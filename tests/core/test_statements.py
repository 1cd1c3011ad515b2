"""The engine's SQL is composed with psycopg.sql, one cached rendering per (statement, schema)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import kestrel_core
from kestrel_core import Kestrel
from kestrel_core.db.migrate import migrate
from kestrel_core.db.sql_files import Statements
from kestrel_core.db.statements import CHANNEL_PREFIX, fragments, notify_channel, render, render_migration

MIGRATIONS = Path(kestrel_core.__file__).parent / "db" / "migrations"


# Blocks the module composes itself with psycopg.sql (identifiers and lists of its own).
COMPOSED = {("kestrel_core.db.roles", name) for name in ("revoke_schema", "grant_schema", "grant_worker_writes")} | {
    ("kestrel_core.db.roles", "grant_function")
}


def named_statements(package: Any = kestrel_core) -> list[tuple[str, str, str]]:
    """Each module constant holding a statement, and each block of a module's statements file
    (but a block with a part pasted into it, tested as the constant it makes, and COMPOSED)."""
    found = []
    files: dict[str, Statements] = {}
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, str) and "{schema}" in value and name.isupper():
                found.append((info.name, name, value))
        if isinstance(vars(module).get("SQL"), Statements):
            files[info.name] = vars(module)["SQL"]
    parts = {name for blocks in files.values() for name in blocks} - set(fragments("kx_schema"))
    for module_name, blocks in files.items():
        for name in blocks:
            value = blocks[name]
            pasted = set(re.findall(r"\{([a-z_]+)\}", value)) & parts
            if "{schema}" in value and not pasted and (module_name, name) not in COMPOSED:
                found.append((module_name, f"SQL.{name}", value))
    return found


def test_every_statement_renders_with_named_fragments_and_no_placeholder_left() -> None:
    statements = named_statements()
    assert len(statements) > 40
    assert any(name.startswith("SQL.") for _, name, _ in statements)
    for module, name, text in statements:
        rendered = render(text, "kx_schema").as_string(None)
        assert '"kx_schema"' in rendered, (module, name)
        # No fragment pasted by name stays unfilled, and no bare token of the old .replace chains.
        assert not re.search(r"\{[a-z_]+\}", rendered), (module, name)
        assert not re.search(r"\b(CLAIM_IS_CURRENT|LOCK_IF_CLAIM_IS_CURRENT|ASYNC_COMMIT)\b", rendered), (module, name)


def test_fence_fragment_is_filled_inside_the_lock_fragment() -> None:
    from kestrel_core.durable import checkpoint

    rendered = " ".join(render(checkpoint.SQL.record, "s1").as_string(None).split())
    assert 'SELECT id FROM "s1".workflow_executions WHERE id = %(eid)s AND owner_id = %(worker_id)s' in rendered
    assert "FOR NO KEY UPDATE" in rendered


def test_rendering_is_cached_per_schema() -> None:
    from kestrel_core.dispatch.claim import CLAIM

    assert render(CLAIM, "s1") is render(CLAIM, "s1")
    assert render(CLAIM, "s1") is not render(CLAIM, "s2")


def test_bad_schema_is_refused_before_any_sql() -> None:
    with pytest.raises(ValueError, match="invalid schema name"):
        render("SELECT 1 FROM {schema}.x", 'x"; DROP TABLE y; --')


def test_migrations_keep_their_braces_and_get_the_schema_as_identifier() -> None:
    text = (MIGRATIONS / "0001_initial.sql").read_text()
    rendered = render_migration(text, "kx").as_string(None)
    assert "{schema}" not in rendered and '"kx".' in rendered


# The functions of the schema that NOTIFY, as their latest migration defines them.
NOTIFYING_FUNCTIONS = """
SELECT p.proname, p.prosrc FROM pg_proc p
 WHERE p.pronamespace = %s::regnamespace AND p.prosrc LIKE '%%pg_notify%%'
"""


def test_the_sql_notify_channel_is_the_python_one(migrated: str) -> None:
    # One SQL spelling of the channel (migration 0009's notify_channel()); every live function
    # that notifies calls it, whatever copies the frozen older migrations still hold.
    with psycopg.connect(migrated, autocommit=True) as conn:
        migrate(conn, "kx_channel")
        for schema in ("kestrel", "kx_channel"):
            # the caller's search_path does not matter: the function names its own schema
            conn.execute("SET search_path = public")
            channel = conn.execute(sql.SQL("SELECT {}.notify_channel()").format(sql.Identifier(schema))).fetchone()[0]
            assert channel == notify_channel(schema) == CHANNEL_PREFIX + schema
            live = dict(conn.execute(NOTIFYING_FUNCTIONS, (schema,)).fetchall())
            assert set(live) == {
                "decide_approval",
                "requeue_execution",
                "set_queue_paused",
                "execution_finished",
                "send_event",
                "sweep_waits",
                "fork_execution",
                "resume_execution",
                "trigger_schedule",
            }
            for name, source in live.items():
                assert "notify_channel()" in source and "current_schema()" not in source, name


def test_an_operator_function_notifies_on_the_python_channel(app: Kestrel, dsn: str, db: psycopg.Connection) -> None:
    eid = db.execute(
        "INSERT INTO workflow_executions (workflow_name, status, error, finished_at) "
        "VALUES ('remediate', 'error', 'boom', now()) RETURNING id"
    ).fetchone()[0]
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(notify_channel("kestrel"))))
        app.requeue(eid, by="t")  # requeue_execution(), re-created by migration 0009
        notes = list(listener.notifies(timeout=5.0, stop_after=1))
    assert [n.payload for n in notes] == ["remediate"]
