"""The per-row ceiling: the engine's own claim and step-boundary statements, one row each,
run by pgbench.

The statements are imported from kestrel_core (not copied), rendered for the schema, and their
``%(name)s`` parameters (``%(name)b``: sent in binary) become pgbench variables (``-M
prepared``: bound, as the engine binds them; the boundary's arrays get one element each). One
pgbench transaction = one execution: claim one row; open the first step's attempt; per step one
boundary that checkpoints it and opens the next (the last one completes the execution instead);
each statement in its own transaction and its own durable commit, as the engine would run them
one execution at a time. What it leaves out: heartbeats, sweeps, the Python around the
statements, pool checkouts. What the engine does that it does not: claim many rows per
statement and write the boundaries of many executions per statement (group commit), so the
engine can pass this ceiling.

The claim's plan: the engine runs its claim with ``SET LOCAL enable_sort = off`` (claim.py
ORDERED_PLAN) in the same pipelined transaction; pgbench gets the same setting for its whole
session (``PGOPTIONS``, no extra round trip). Without it the claim sorts the whole seeded
backlog on every call (16-25 ms at 40k rows instead of ~0.2 ms; the ceiling fell from
~1,900 to 94 one-step wf/s): ``e.queue <> ALL (ARRAY(SELECT ... FROM queues))`` is estimated
to keep ~0 rows when every row has the same queue (n_distinct 1), so the planner believes the
backlog is empty and a seq scan + sort looks cheaper than walking the enqueued index, even
with fresh statistics. Other differences from the engine: the session's other statements get
``enable_sort = off`` too (it only makes a sort the last resort; ``jit = off`` keeps that
from making the boundary statement look costly enough to JIT-compile), and it does not run
the limited-queue check the engine pipelines into the claim transaction now and then.
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

from kestrel_core.db import render
from kestrel_core.dispatch import CLAIM, ORDERED_PLAN, START_KEY
from kestrel_core.durable import WRITE_BOUNDARIES as WRITE

from .databases import checkpoint, fresh_database
from .workloads import STEPS

SCHEMA = "kestrel"
OWNER = "pgbench-ceiling"
# pgbench clients at most (one per execution the workers run at once, up to this): a default
# server allows 100 connections, and on 2 cores more clients only queue on the CPU.
MAX_CLIENTS = 64

_PARAM = re.compile(r"%\((\w+)\)[sb]")  # text (s) or binary (b) placeholders

# Enqueued rows for pgbench to claim; the same shape enqueue_many writes.
SEED = """
INSERT INTO {schema}.workflow_executions (workflow_name, input)
SELECT %(name)s, to_jsonb(i) FROM generate_series(1, %(n)s::int) AS i
"""


def session_options(statement: str = ORDERED_PLAN) -> str:
    """The engine's ``SET LOCAL name = value`` as libpq ``PGOPTIONS`` for a whole session."""
    m = re.fullmatch(r"\s*SET\s+LOCAL\s+(\w+)\s*(?:=|TO)\s*(\w+)\s*;?\s*", statement, re.IGNORECASE)
    if m is None:
        raise ValueError(f"cannot turn the engine's {statement!r} into PGOPTIONS: update bench/ceiling.py")
    return f"-c {m.group(1)}={m.group(2)}"


# What the engine's claim transaction sets (claim.py ORDERED_PLAN), for every pgbench session;
# and no JIT: under enable_sort = off the boundary statement's one (unavoidable) sort costs
# 1e10, which would make Postgres JIT-compile it on every call (0.8 s each), while the engine
# runs that statement with sorts enabled, far below jit_above_cost.
PGOPTIONS = session_options() + " -c jit=off"
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


def _boundary(steps_open: str, finish: str | None, done: bool, position: int) -> dict[str, str]:
    """pgbench values of one single-row boundary: finish step ``finish`` (its attempt opened by
    the previous boundary, read by gset into ``o_``), open ``steps_open``, complete when ``done``."""
    none = {"text": "ARRAY[NULL]::text[]", "int": "ARRAY[NULL]::int[]", "jsonb": "ARRAY[NULL]::jsonb[]"}
    return {
        "eids": "ARRAY[:c_id]",
        "worker_ids": "ARRAY[:worker_id]",
        "claim_epochs": "ARRAY[:c_claim_epoch]",
        "finish_steps": f"ARRAY[:{finish}]" if finish else none["text"],
        "attempts": "ARRAY[:o_opened]" if finish else none["int"],
        "started": "ARRAY[:o_opened_at]" if finish else "ARRAY[NULL]::timestamptz[]",
        "outputs": "ARRAY[:output]" if finish else none["jsonb"],
        "errors": none["text"],
        "keeps": f"ARRAY[{'true' if finish else 'false'}]",
        "positions": f"ARRAY[{position}]" if finish else none["int"],
        "open_steps": f"ARRAY[:{steps_open}]" if steps_open else none["text"],
        "statuses": "ARRAY[:status]" if done else none["text"],
        "results": "ARRAY[:output]" if done else none["jsonb"],
        "failures": none["text"],
        "fresh": "ARRAY[false]",
        "elapsed": "ARRAY[NULL]::float8[]",
        "sync": "'on'" if finish or done else "'off'",
    }


def script(steps: int) -> str:
    """The pgbench script for one execution of a no-op workflow of ``steps`` steps."""
    claim = {
        "names": ":names",
        "n": ":batch",
        "worker_id": ":worker_id",
        "lease": ":lease",
        "versions": ":versions",
        "queues": "NULL",
        "buckets": "NULL",
        # pgbench keeps no mark between transactions: every claim walks from the start, as a
        # worker's does at least once a second.
        "after_p": ":after_p",
        "after_at": ":after_at",
        "after_id": ":after_id",
    }
    parts = [
        "-- claim (RETURNING id, ..., claim_epoch: c_id, c_claim_epoch)",
        to_pgbench(CLAIM, claim, gset="c_"),
        "-- open step s0 (opened, opened_at: o_opened, o_opened_at)",
        to_pgbench(WRITE, _boundary("step0", None, False, 0), gset="o_"),
    ]
    for k in range(steps):
        last = k == steps - 1
        parts.append(f"-- checkpoint s{k}, then " + ("complete" if last else f"open s{k + 1}"))
        parts.append(
            to_pgbench(
                WRITE, _boundary("" if last else f"step{k + 1}", f"step{k}", last, k + 1), gset=None if last else "o_"
            )
        )
    return "\n".join(parts) + "\n"


def _defines(workflow: str, steps: int) -> list[str]:
    values = {
        "names": "{" + workflow + "}",
        "versions": "{NULL}",
        "batch": "1",
        "worker_id": OWNER,
        "lease": "30 seconds",
        "output": "null",
        "outcome": "success",
        "status": "success",
        "after_p": str(START_KEY[0]),
        "after_at": START_KEY[1].isoformat(),
        "after_id": str(START_KEY[2]),
        **{f"step{k}": f"s{k}" for k in range(steps)},
    }
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


def run_ceiling(
    admin: str, workflow: str, *, clients: int, threads: int, seconds: float, seed_rows: int | None = None
) -> dict[str, Any]:
    """pgbench the engine's statements for ``workflow`` on a fresh database; executions/s."""
    binary = pgbench_binary()
    if binary is None:
        raise FileNotFoundError(
            "pgbench not found: install the PostgreSQL client tools (apt-get install postgresql-client)"
        )
    steps = STEPS[workflow]
    rows = seed_rows or max(20_000, int(seconds * 12_000 / (1 + steps // 2)))
    with fresh_database(admin) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(render(SEED, SCHEMA), {"name": workflow, "n": rows})
            conn.execute(render(ANALYZE, SCHEMA))
            checkpoint(conn)
        with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix=f"ceiling-{workflow}-", delete=False) as f:
            f.write(script(steps))
            path = f.name
        params = conninfo_to_dict(dsn)
        cmd = [
            binary,
            "-n",
            "-M",
            "prepared",
            "-c",
            str(clients),
            "-j",
            str(max(1, min(threads, clients))),
            "-T",
            str(max(1, round(seconds))),
            "-f",
            path,
            *_defines(workflow, steps),
            "-h",
            params.get("host", "127.0.0.1"),
            "-p",
            str(params.get("port", 5432)),
            "-U",
            params.get("user", "postgres"),
            params["dbname"],
        ]
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120, env=_pgenv(params))
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
        "workflow": workflow,
        "steps": steps,
        "clients": clients,
        "threads": threads,
        "seconds": round(time.monotonic() - started, 2),
        "seeded": rows,
        "aborted": proc.returncode != 0,
        "workflows_per_s": round(result["tps"], 1),
        "steps_per_s": round(result["tps"] * steps, 1),
        "executions": int(result["transactions"] or 0),
        "failed": int(result["failed"]),
        "latency_avg_ms": result["latency_avg_ms"],
    }


def _pgenv(params: dict[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    env["PGOPTIONS"] = f"{env.get('PGOPTIONS', '')} {PGOPTIONS}".strip()
    if params.get("password"):
        env["PGPASSWORD"] = str(params["password"])
    return env
