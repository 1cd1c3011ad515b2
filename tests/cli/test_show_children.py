"""`kestrel-console show` links a child to its parent and a parent to its children."""

from __future__ import annotations

import json
import subprocess

import psycopg

from tests.cli.script import console
from tests.seed import seed_family


def family(db: psycopg.Connection) -> tuple[int, list[int]]:
    return seed_family(db, [("leaf", "success"), ("leaf", "running")])


def show(dsn: str, *args: str) -> subprocess.CompletedProcess:
    return console("show", *args, dsn=dsn)


def test_show_lists_children_and_parent_in_text_and_json(dsn: str, db: psycopg.Connection) -> None:
    parent, (done, running) = family(db)
    text = show(dsn, str(parent))
    assert text.returncode == 0, text.stderr
    assert f"children (2): #{done} success, #{running} running" in text.stdout
    doc = json.loads(show(dsn, str(parent), "--format", "json").stdout)[0]
    assert doc["parent_id"] is None
    assert doc["children"] == [
        {"id": done, "workflow": "leaf", "status": "success"},
        {"id": running, "workflow": "leaf", "status": "running"},
    ]
    child = show(dsn, str(running))
    assert child.returncode == 0, child.stderr
    assert f"parent #{parent}" in child.stdout
    assert json.loads(show(dsn, str(running), "--format", "json").stdout)[0]["parent_id"] == parent
