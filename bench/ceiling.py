"""The raw ceiling: the engine's own claim / checkpoint / complete statements run by pgbench.

The statements are imported from kestrel_core (not copied), rendered for the schema, and their
``%(name)s`` parameters become pgbench variables (``-M prepared``: bound, as the engine binds
them). One pgbench transaction = one execution: claim one row, then per step start_attempt +
finish_step, then complete; each statement in its own transaction, as the engine runs them in
autocommit. What it leaves out (so the real engine can only be slower): heartbeats, sweeps, the
Python around the statements, and connection-pool checkouts. What it does less well than the
engine: the engine may claim several rows in one statement; the script always claims one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from kestrel_core.checkpoint import FINISH_STEP, START_ATTEMPT
from kestrel_core.claim import CLAIM
from kestrel_core.completion import COMPLETE
from kestrel_core.statements import render

from .databases import fresh_database
from .workloads import STEPS

SCHEMA = "kestrel"
OWNER = "pgbench-ceiling"

_PARAM = re.compile(r"%\((\w+)\)s")

# Enqueued rows for pgbench to claim; the same shape enqueue_many writes.
SEED = """
INSERT INTO {schema}.workflow_executions (workflow_name, input)
SELECT %(name)s, to_jsonb(i) FROM generate_series(1, %(n)s::int) AS i
"""
# Planner statistics that know about the backlog (see throughput.py: the engine runs the same).
ANALYZE = "ANALYZE {schema}.workflow_executions"
LEFT = "SELECT count(*) FROM {schema}.workflow_executions WHERE status = 'enqueued'"


def pgbench_binary() -> str | None:
    """The pgbench found on PATH or in the usual PostgreSQL folders, or None."""
    found = shutil.which("pgbench")
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin/pgbench"), reverse=True):
        return str(candidate)
    return None


def to_pgbench(statement: str, variables: dict[str, str], *, gset: str | None = None) -> str:
    """One engine statement as a pgbench command: rendered for the schema, each ``%(name)s``
    replaced by ``variables[name]`` (a ``:variable``, or ``NULL`` where the engine binds None,
    since pgbench cannot bind a NULL), ended by ``;`` or by ``\\gset PREFIX``."""
    text = render(statement, SCHEMA).as_string(None).strip()

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            raise KeyError(f"no pgbench variable for %({name})s")
        return variables[name]

    text = _PARAM.sub(sub, text).replace("%%", "%")
    return f"{text} \\gset {gset}" if gset else f"{text};"


def script(steps: int) -> str:
    """The pgbench script for one execution of a no-op workflow of ``steps`` steps."""
    claim = {"names": ":names", "n": ":batch", "owner": ":owner", "lease": ":lease",
             "versions": ":versions", "queues": "NULL"}
    fence = {"eid": ":c_id", "owner": ":owner", "epoch": ":c_claim_epoch"}
    parts = ["-- claim (RETURNING id, ..., claim_epoch: c_id, c_claim_epoch)",
             to_pgbench(CLAIM, claim, gset="c_")]
    for k in range(steps):
        step = {**fence, "step": f":step{k}"}
        parts.append(f"-- step s{k}: start the attempt, then the checkpoint")
        parts.append(to_pgbench(START_ATTEMPT, step, gset="a_"))
        parts.append(to_pgbench(FINISH_STEP, {
            **step, "output": ":output", "error": "NULL", "started_at": ":a_started_at",
            "attempts": ":a_attempt", "outcome": ":outcome", "attempt_id": ":a_id",
            "seq": str(k + 1)}))
    parts.append("-- complete")
    parts.append(to_pgbench(COMPLETE, {**fence, "status": ":status", "output": ":output", "error": "NULL"}))
    return "\n".join(parts) + "\n"


def _defines(workflow: str, steps: int) -> list[str]:
    values = {"names": "{" + workflow + "}", "versions": "{NULL}", "batch": "1", "owner": OWNER, "lease": "30 seconds",
              "output": "null", "outcome": "success", "status": "success",
              **{f"step{k}": f"s{k}" for k in range(steps)}}
    out: list[str] = []
    for key, value in values.items():
        out += ["-D", f"{key}={value}"]
    return out


def _parse(output: str) -> dict[str, Any]:
    def grab(pattern: str) -> float | None:
        m = re.search(pattern, output)
        return float(m.group(1)) if m else None

    return {
        "tps": grab(r"tps = ([0-9.]+) \(without initial connection time\)"),
        "transactions": grab(r"number of transactions actually processed: (\d+)"),
        "failed": grab(r"number of failed transactions: (\d+)") or 0,
        "latency_avg_ms": grab(r"latency average = ([0-9.]+) ms"),
    }


def run_ceiling(admin: str, workflow: str, *, clients: int, threads: int, seconds: float,
                seed_rows: int | None = None) -> dict[str, Any]:
    """pgbench the engine's statements for ``workflow`` on a fresh database; executions/s."""
    binary = pgbench_binary()
    if binary is None:
        raise FileNotFoundError("pgbench not found: install the PostgreSQL client tools (apt-get install postgresql-client)")
    steps = STEPS[workflow]
    rows = seed_rows or max(20_000, int(seconds * 12_000 / (1 + steps // 2)))
    with fresh_database(admin) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(render(SEED, SCHEMA), {"name": workflow, "n": rows})
            conn.execute(render(ANALYZE, SCHEMA))
            _checkpoint(conn)
        with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix=f"ceiling-{workflow}-", delete=False) as f:
            f.write(script(steps))
            path = f.name
        params = conninfo_to_dict(dsn)
        cmd = [binary, "-n", "-M", "prepared", "-c", str(clients), "-j", str(max(1, min(threads, clients))),
               "-T", str(max(1, round(seconds))), "-f", path, *_defines(workflow, steps),
               "-h", params.get("host", "127.0.0.1"), "-p", str(params.get("port", 5432)),
               "-U", params.get("user", "postgres"), params["dbname"]]
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120,
                              env=_pgenv(params))
        Path(path).unlink(missing_ok=True)
        out = proc.stdout + proc.stderr
        result = _parse(out)
        with psycopg.connect(dsn, autocommit=True) as conn:
            left = conn.execute(render(LEFT, SCHEMA)).fetchone()[0]
    if proc.returncode != 0 or result["tps"] is None:
        raise RuntimeError(f"pgbench failed (exit {proc.returncode}):\n{out[-2000:]}")
    if left == 0:
        raise RuntimeError(f"pgbench claimed all {rows} seeded rows before the end: seed more (seed_rows)")
    return {
        "workflow": workflow, "steps": steps, "clients": clients, "threads": threads,
        "seconds": round(time.monotonic() - started, 2), "seeded": rows, "aborted": proc.returncode != 0,
        "workflows_per_s": round(result["tps"], 1), "steps_per_s": round(result["tps"] * steps, 1),
        "executions": int(result["transactions"] or 0), "failed": int(result["failed"]),
        "latency_avg_ms": result["latency_avg_ms"],
    }


def _pgenv(params: dict[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    if params.get("password"):
        env["PGPASSWORD"] = str(params["password"])
    return env


def _checkpoint(conn: psycopg.Connection) -> None:
    """Flush the seeding's dirty pages now, not during the measurement (needs superuser)."""
    try:
        conn.execute("CHECKPOINT")
    except psycopg.Error:
        pass
