"""The throughput benchmark's printed tables: rates side by side, and Postgres's writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .report import table

# The first columns of both rate tables: which run, and Kestrel's rate in it.
RUN_HEADERS = ["workload", "workers", "Kestrel wf/s"]


def _run_cells(r: dict[str, Any]) -> list[Any]:
    k = r["kestrel"]
    return [k["workflow"], k["workers"], k["workflows_per_s"]]


def throughput_table(rows: list[dict[str, Any]], concurrency: int, n: int) -> str:
    """Kestrel, the pgbench ceiling and DBOS per workload and worker count, with Kestrel's
    commits and statements per workflow (statements: "-" without pg_stat_statements)."""
    headers = [*RUN_HEADERS, "steps/s", "commits/wf", "stmts/wf", "ceiling wf/s", "K/ceiling"]
    headers += ["DBOS wf/s", "K/DBOS", "machine busy"]
    cells = []
    for r in rows:
        k = r["kestrel"]
        cells.append(
            [*_run_cells(r), k["steps_per_s"], k.get("commits_per_workflow"), k.get("statements_per_workflow")]
            + [r.get("ceiling", {}).get("workflows_per_s"), r["kestrel_vs_ceiling"]]
            + [r.get("dbos", {}).get("workflows_per_s"), r["kestrel_vs_dbos"], f"{k['machine_busy']:.0%}"]
        )
    return table(f"Throughput (no-op workflows, concurrency {concurrency} per worker process, N={n})", headers, cells)


def fed_table(rows: list[dict[str, Any]], threads: int, n: int) -> str:
    """The one-step workload fed by single enqueue calls while the workers run: end to end,
    the calls' own rate, the bulk-fed rate of the same run, the same workers fed by plain
    one-row INSERTs from as many threads, DBOS fed the same way."""
    headers = [*RUN_HEADERS, "enqueue calls/s", "rows/batch", "bulk-fed wf/s", "plain-INSERT-fed wf/s", "K/plain"]
    headers += ["DBOS wf/s", "DBOS calls/s", "K/DBOS"]
    cells = []
    for r in rows:
        k, plain, dbos = r["kestrel"], r.get("plain", {}), r.get("dbos", {})
        cells.append(
            [*_run_cells(r), k.get("enqueue_calls_per_s"), k.get("rows_per_batch"), r["bulk_workflows_per_s"]]
            + [plain.get("workflows_per_s"), r.get("kestrel_vs_plain")]
            + [dbos.get("workflows_per_s"), dbos.get("enqueue_calls_per_s"), r["kestrel_vs_dbos"]]
        )
    title = f"Fed by single enqueues from {threads} threads while the workers run (1 step, N={n})"
    return table(title, headers, cells)


def writes_table(rows: list[dict[str, Any]]) -> str:
    """Row writes per workflow in each table of the schema (pg_stat_user_tables deltas), and
    the share of updates that were HOT (no index touched)."""
    lines: list[list[Any]] = []
    for r in rows:
        k = r["kestrel"]
        for name, w in k.get("postgres", {}).get("writes", {}).items():
            lines.append(
                [
                    f"{k['workflow']} x{k['workers']}",
                    name,
                    w["inserts_per_workflow"],
                    w["updates_per_workflow"],
                    None if w["hot_pct"] is None else f"{w['hot_pct']:.0f}%",
                    w["deletes_per_workflow"],
                ]
            )
    return table(
        "Postgres writes per workflow (rows, from pg_stat_user_tables)",
        ["run", "table", "inserts", "updates", "HOT %", "deletes"],
        lines,
    )


def profile_paths(folder: Path, rows: list[dict[str, Any]]) -> list[Path]:
    """The .pstats files the profiled workers of these rows wrote (missing ones left out)."""
    return sorted(
        p for p in folder.glob("*.pstats") if any(p.name.startswith(f"{r['kestrel']['workflow']}-") for r in rows)
    )
