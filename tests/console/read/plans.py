"""What the console's plan tests share: a big history database to EXPLAIN on, the nodes of a
plan, and the relations a statement scans sequentially (partitions named as their table)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from kestrel_core import Kestrel
from kestrel_core.db.statements import render
from tests.conftest import create_database, drop_at_the_end
from tests.seed import seed_bulk_finished, seed_history

# Each partition (and partition index) of the schema: the partitioned table (or index) it
# belongs to, and its pages (migration 0022: plans name partitions, not their parent).
PARTITIONS = """
SELECT c.relname, r.relname, c.relpages FROM pg_class c JOIN pg_class r ON r.oid = pg_partition_root(c.oid)
 WHERE c.relnamespace = 'kestrel'::regnamespace AND c.relispartition
"""


@contextmanager
def big_history(name: str, finished: int, live: int, *, with_steps: bool = False) -> Iterator[str]:
    """A database of its own: the seeded story, ``finished`` finished executions (with their
    step attempts when ``with_steps``), ``live`` enqueued ones, analyzed; dropped after."""
    dsn = create_database(name)
    try:
        with Kestrel(dsn) as app:
            app.migrate()
            with psycopg.connect(dsn, autocommit=True, options="-c search_path=kestrel") as conn:
                seed_history(conn)
                seed_bulk_finished(conn, finished, with_steps=with_steps, analyze=False)
                app.enqueue_many("bulk", [{"n": i} for i in range(live)])
                conn.execute("VACUUM ANALYZE workflow_executions")
                if with_steps:
                    conn.execute("VACUUM ANALYZE step_attempts")
                conn.execute("ANALYZE execution_counts")
        yield dsn
    finally:
        drop_at_the_end(dsn)


def plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """A plan node and every node below it, depth first."""
    nodes = [node]
    for child in node.get("Plans", []):
        nodes += plan_nodes(child)
    return nodes


def as_parents(conn: psycopg.Connection, nodes: list[dict]) -> list[dict]:
    """Plan nodes with partitions named as their partitioned table (and partition indexes as
    its index); a sequential scan of an empty partition (a range ahead, 0 pages) is left out:
    it reads nothing, whatever the history's size."""
    parts = {name: (root, pages) for name, root, pages in conn.execute(PARTITIONS)}
    named = []
    for node in nodes:
        relation = node.get("Relation Name")
        if node["Node Type"] == "Seq Scan" and relation in parts and parts[relation][1] == 0:
            continue
        node = dict(node)
        for field in ("Relation Name", "Index Name"):
            if node.get(field) in parts:
                node[field] = parts[node[field]][0]
        named.append(node)
    return named


def seq_scans(conn: psycopg.Connection, statements: dict) -> dict[str, list[str]]:
    """Per statement, the relations it scans sequentially (EXPLAIN (FORMAT JSON))."""
    found: dict[str, list[str]] = {}
    for key, (statement, params) in statements.items():
        plan = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + render(statement, "kestrel"), params).fetchone()[0]
        nodes = as_parents(conn, plan_nodes(plan[0]["Plan"]))
        found[key] = [n.get("Relation Name") for n in nodes if n["Node Type"] == "Seq Scan"]
    return found
