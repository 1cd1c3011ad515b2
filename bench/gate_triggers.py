"""What migration 0024's gate triggers cost the hot path: A/B in one sitting.

``python -m bench.gate_triggers [--rounds 4] [--executions 2000] [--claims 2000]``

One fresh database, a login granted only the worker role (the triggers take their non-owner
path for it, as in production), and two measures, each alternated ON/OFF (the triggers
enabled, then disabled with ``ALTER TABLE ... DISABLE TRIGGER`` on every table and partition
that has them) for ``--rounds`` rounds:

- the claim alone: ``claim`` of one execution, ``--claims`` times (the DELETE of ready
  rows fires the statement trigger guard_ready_rows_delete once per claim);
- end to end: an in-process worker (that login, concurrency 8) runs ``--executions``
  executions of a three-step workflow (claims, heartbeats, step boundaries, completions).

Prints the medians and each round; the difference is within noise when it is within the spread
of the rounds of one side.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from datetime import timedelta

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.databases import admin_dsn, fresh_database
from kestrel_core import Kestrel
from kestrel_core.db import ensure_roles
from kestrel_core.dispatch import claim_executions

TRIGGERS = (
    "guard_waiting_executions",
    "guard_waits",
    "guard_ready_rows_delete",
    "guard_ready_rows_update",
    "guard_step_attempts",
    "guard_queue_writes",
    "audit_queue_insert",
    "audit_queue_update",
    "guard_schedule_insert",
    "guard_schedule_update",
    "audit_schedule_insert",
    "audit_schedule_update",
)
WHERE_THEY_ARE = """
SELECT t.tgrelid::regclass::text, t.tgname FROM pg_trigger t
 WHERE t.tgname = ANY(%s) AND NOT t.tgisinternal ORDER BY 1, 2
"""


FUNCTION_TIMES = """
SELECT funcname, calls, total_time FROM pg_stat_user_functions
 WHERE schemaname = 'kestrel' AND funcname LIKE ANY (ARRAY['guard%%', 'ready_recheck', 'audit_declarations'])
 ORDER BY funcname
"""


def set_triggers(admin: psycopg.Connection, enabled: bool) -> None:
    verb = sql.SQL("ENABLE" if enabled else "DISABLE")
    for relation, trigger in admin.execute(WHERE_THEY_ARE, (list(TRIGGERS),)).fetchall():
        admin.execute(
            sql.SQL("ALTER TABLE {} {} TRIGGER {}").format(
                sql.SQL(relation), verb, sql.Identifier(trigger)
            )  # regclass text: the catalog's quoting
        )


def claims_per_second(admin: psycopg.Connection, worker_dsn: str, n: int) -> float:
    admin.execute(
        "INSERT INTO kestrel.workflow_executions (workflow_name, status)"
        " SELECT 'b', 'enqueued' FROM generate_series(1, %s)",
        (n,),
    )
    with psycopg.connect(worker_dsn, autocommit=True) as conn:
        started = time.perf_counter()
        for _ in range(n):
            claim_executions(conn, "kestrel", worker_id="bench", names=["b"], n=1, lease=timedelta(seconds=60))
        took = time.perf_counter() - started
    admin.execute(
        "UPDATE kestrel.workflow_executions SET status = 'success', finished_at = now() WHERE status = 'running'"
    )
    return n / took


def executions_per_second(worker_dsn: str, n: int) -> float:
    app = Kestrel(worker_dsn)

    @app.workflow("three_steps")
    def three_steps(ctx, i):
        a = ctx.step("a", lambda: i)
        b = ctx.step("b", lambda: a + 1)
        return ctx.step("c", lambda: b + 1)

    try:
        app.enqueue_many("three_steps", list(range(n)))
        worker = app.worker(concurrency=8, lease=timedelta(seconds=30), poll_interval=0.05)
        started = time.perf_counter()
        worker.start()
        with app.connection() as conn:
            while conn.execute(
                "SELECT count(*) FROM kestrel.workflow_executions WHERE workflow_name = 'three_steps'"
                " AND status IN ('enqueued', 'running')"
            ).fetchone() != (0,):
                time.sleep(0.02)
        took = time.perf_counter() - started
        worker.stop(grace=timedelta(seconds=5))
    finally:
        app.close()
    return n / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--executions", type=int, default=2000)
    parser.add_argument("--claims", type=int, default=2000)
    args = parser.parse_args()
    login = f"bench_worker_{uuid.uuid4().hex[:8]}"
    with fresh_database(admin_dsn()) as dsn, psycopg.connect(dsn, autocommit=True) as admin:
        ensure_roles(admin, "kestrel")
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE kestrel_worker").format(sql.Identifier(login)))
        # The trigger functions' own time, counted by the server (pg_stat_user_functions).
        admin.execute(sql.SQL("ALTER ROLE {} SET track_functions = 'pl'").format(sql.Identifier(login)))
        worker_dsn = make_conninfo(dsn, user=login)
        results: dict[str, dict[bool, list[float]]] = {
            "claims/s": {True: [], False: []},
            "executions/s": {True: [], False: []},
        }
        try:
            for round_ in range(args.rounds):
                for enabled in (True, False) if round_ % 2 == 0 else (False, True):
                    set_triggers(admin, enabled)
                    results["claims/s"][enabled].append(claims_per_second(admin, worker_dsn, args.claims))
                    results["executions/s"][enabled].append(executions_per_second(worker_dsn, args.executions))
            time.sleep(1)  # the sessions' function counts reach the statistics when they end
            functions = admin.execute(FUNCTION_TIMES).fetchall()
        finally:
            set_triggers(admin, True)
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (login,))
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(login)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(login)))
    for name, calls, total_ms in functions:
        print(f"{name:26} {calls:8} calls  {1000 * total_ms / calls:7.1f} us per call (server time, triggers on)")
    for measure, sides in results.items():
        on, off = statistics.median(sides[True]), statistics.median(sides[False])
        print(
            f"{measure:14} triggers on {on:9.1f} (rounds {', '.join(f'{v:.0f}' for v in sides[True])})"
            f"  off {off:9.1f} (rounds {', '.join(f'{v:.0f}' for v in sides[False])})  on/off {on / off:.3f}"
        )


if __name__ == "__main__":
    main()
