"""Migration of a populated database while it is written to: the upgrade that
partitioned the history must run in place, online, on a live system of at least 1M executions.

1. The code of the last revision before the history was partitioned (migration
   ``PARTITIONED_AT``) is exported from git (``git archive``) and migrates a fresh database:
   today's schema, exactly as a user has it.
2. The history is seeded with plain SQL: ``executions`` finished executions (every 10th with
   an idempotency key), one checkpoint and one attempt each, plus live ones (enqueued, and
   waiting on an approval).
3. While this code's ``migrate`` runs, a probe writes as an application would, on its own
   connection: insert an execution, update it, read a seeded one, in a loop. The longest probe
   operation is the longest any writer was blocked by the migration ("online" means short).
4. Afterwards every seeded row is checked: counts per table, the ids' sum, the table now
   partitioned, an idempotency key of the old history still deduplicating, a new enqueue.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from kestrel_core import Kestrel
from kestrel_core.db import render

from .background import Background
from .databases import create_database, drop_database
from .report import percentile

SCHEMA = "kestrel"
# The migration that partitions the history; the code before it is "today's schema".
PARTITIONED_AT = 20
REPO = Path(__file__).resolve().parents[1]
MIGRATION_FILES = "kestrel_core/db/migrations"
# Run by the old code, in a process of its own (its kestrel_core first on the path).
OLD_MIGRATE = "import sys\nfrom kestrel_core import Kestrel\nwith Kestrel(sys.argv[1]) as app:\n    app.migrate()\n"
VERSION = "SELECT max(version) FROM {schema}.schema_migrations"
KIND = """
SELECT c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = %s AND c.relname = %s
"""

SEED_FINISHED = """
INSERT INTO {schema}.workflow_executions
    (workflow_name, status, input, output, idempotency_key, owner_id, claims, claim_epoch,
     run_at, created_at, updated_at, started_at, finished_at)
SELECT 'seeded', 'success', jsonb_build_object('n', i), '{{"ok": true}}',
       CASE WHEN i %% 10 = 0 THEN 'seed-' || i END, 'worker-0', 1, 1, fin, fin, fin, fin, fin
  FROM generate_series(1, %(n)s::int) AS i,
       LATERAL (SELECT now() - interval '1 second' * (%(n)s::int - i) / 100 AS fin) AS t
"""
SEED_CHECKPOINTS = """
INSERT INTO {schema}.operation_outputs (execution_id, step_id, output, owner_id, claim_epoch, seq)
SELECT id, 'work', '1', 'worker-0', 1, 1 FROM {schema}.workflow_executions
"""
SEED_ATTEMPTS = """
INSERT INTO {schema}.step_attempts (execution_id, step_id, attempt, owner_id, claim_epoch, finished_at, outcome)
SELECT execution_id, step_id, 1, owner_id, 1, created_at, 'success' FROM {schema}.operation_outputs
"""
SEED_LIVE = """
INSERT INTO {schema}.workflow_executions (workflow_name, status, input, idempotency_key)
SELECT 'seeded', CASE WHEN i %% 2 = 0 THEN 'waiting' ELSE 'enqueued' END, jsonb_build_object('live', i),
       'live-' || i
  FROM generate_series(1, %(n)s::int) AS i
"""
SEED_WAITS = """
INSERT INTO {schema}.workflow_waits (execution_id, step_id, kind, details)
SELECT id, 'approve', 'approval', '{{}}' FROM {schema}.workflow_executions WHERE status = 'waiting'
"""
VACUUM = "VACUUM (ANALYZE) {schema}.workflow_executions, {schema}.operation_outputs, {schema}.step_attempts"
# What must be the same before and after (the probe's rows are told apart by their name).
TRUTH = """
SELECT (SELECT count(*) FROM {schema}.workflow_executions WHERE workflow_name = 'seeded'),
       (SELECT coalesce(sum(id), 0) FROM {schema}.workflow_executions WHERE workflow_name = 'seeded'),
       (SELECT count(*) FROM {schema}.workflow_executions WHERE workflow_name = 'seeded' AND status = 'success'),
       (SELECT count(*) FROM {schema}.workflow_executions WHERE idempotency_key IS NOT NULL
                                                            AND workflow_name = 'seeded'),
       (SELECT count(*) FROM {schema}.operation_outputs),
       (SELECT count(*) FROM {schema}.step_attempts),
       (SELECT count(*) FROM {schema}.workflow_waits)
"""
TRUTH_NAMES = ("executions", "sum of ids", "finished", "with a key", "checkpoints", "attempts", "waits")
KEYED = "SELECT id FROM {schema}.workflow_executions WHERE idempotency_key = %s"

# The probe: what an application does while the migration runs.
PROBE_INSERT = "INSERT INTO {schema}.workflow_executions (workflow_name, input) VALUES ('probe', '{{}}') RETURNING id"
PROBE_UPDATE = "UPDATE {schema}.workflow_executions SET priority = 1 WHERE id = %s"
PROBE_READ = "SELECT status FROM {schema}.workflow_executions WHERE id = %s"
PROBE_PAUSE_S = 0.01


def old_revision(version: int = PARTITIONED_AT) -> str:
    """The newest commit without migration ``version``: the parent of the commit adding it,
    or HEAD when this checkout does not have it yet."""
    added = _git("log", "--diff-filter=A", "--format=%H", "--", f"{MIGRATION_FILES}/{version:04d}_*.sql").split()
    return f"{added[-1]}^" if added else "HEAD"


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise RuntimeError(
            f"the migration benchmark needs this repository's git history (git {' '.join(args)} failed: "
            f"{getattr(exc, 'stderr', '') or exc}); run it from a clone, not an installed copy"
        ) from None
    return done.stdout.strip()


def export_code(revision: str, into: Path) -> Path:
    """``kestrel_core`` as of ``revision``, unpacked under ``into``; returns the folder to
    put first on ``PYTHONPATH``."""
    archive = into / "old.tar"
    _git("archive", "--format=tar", "-o", str(archive), revision, "kestrel_core")
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: no links out, no absolute paths
            tar.extractall(into, filter="data")
        else:  # our own repository's archive
            tar.extractall(into)
    return into


def migrate_with_old_code(code: Path, dsn: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(code)}
    subprocess.run([sys.executable, "-c", OLD_MIGRATE, dsn], env=env, check=True, cwd=code)


@dataclass
class Probe(Background):
    """Writes as an application would, from its own thread, timing every operation."""

    thread_name = "migration-probe"
    join_s = 60.0
    dsn: str
    ops: list[tuple[float, float]] = field(default_factory=list)  # (started, seconds)
    errors: list[str] = field(default_factory=list)

    def _run(self) -> None:
        insert, update, read = (render(s, SCHEMA) for s in (PROBE_INSERT, PROBE_UPDATE, PROBE_READ))
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            seeded = conn.execute(render("SELECT min(id) FROM {schema}.workflow_executions", SCHEMA)).fetchone()[0]
            mine = [seeded]  # the probe's newest row (a live one: finished rows are guarded)
            steps: tuple[Callable[[], object], ...] = (
                lambda: mine.append(conn.execute(insert).fetchone()[0]),
                lambda: conn.execute(update, (mine[-1],)),
                lambda: conn.execute(read, (seeded,)).fetchone(),
            )
            while not self._stop.is_set():
                for step in steps:
                    t = time.monotonic()
                    try:
                        step()
                    except psycopg.Error as exc:
                        self.errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
                    self.ops.append((t, time.monotonic() - t))
                self._stop.wait(PROBE_PAUSE_S)


def run_migration(
    admin: str, *, executions: int = 1_000_000, live: int = 10_000, echo: Callable[[str], None] = print
) -> dict[str, Any]:
    """Seed today's schema, migrate it under a writing probe, check every row (see the module)."""
    revision = old_revision()
    old_commit = _git("rev-parse", "--short", revision)
    dsn = create_database(admin, "kestrel_bench_migrate")
    try:
        with tempfile.TemporaryDirectory(prefix="kestrel-old-") as tmp:
            code = export_code(revision, Path(tmp))
            migrate_with_old_code(code, dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            from_version = conn.execute(render(VERSION, SCHEMA)).fetchone()[0]
            echo(f"schema version {from_version} from commit {old_commit}; seeding {executions:,} executions")
            t = time.monotonic()
            conn.execute(render(SEED_FINISHED, SCHEMA), {"n": executions})
            conn.execute(render(SEED_CHECKPOINTS, SCHEMA))
            conn.execute(render(SEED_ATTEMPTS, SCHEMA))
            conn.execute(render(SEED_LIVE, SCHEMA), {"n": live})
            conn.execute(render(SEED_WAITS, SCHEMA))
            conn.execute(render(VACUUM, SCHEMA))
            seed_s = time.monotonic() - t
            before = conn.execute(render(TRUTH, SCHEMA)).fetchone()
            keyed = conn.execute(render(KEYED, SCHEMA), ("seed-10",)).fetchone()
            echo(f"seeded in {seed_s:.1f} s; migrating while the probe writes")
        probe = Probe(dsn)
        probe.start()
        try:
            while not probe.ops and probe._thread is not None and probe._thread.is_alive():
                time.sleep(0.01)  # the probe is writing before the migration starts
            t0 = time.monotonic()
            with Kestrel(dsn) as app:
                applied = app.migrate()
            migrate_s = time.monotonic() - t0
            t1 = time.monotonic()
            time.sleep(0.2)  # a few probes after the migration, on the new layout
        finally:
            probe.stop()
        with psycopg.connect(dsn, autocommit=True) as conn:
            after = conn.execute(render(TRUTH, SCHEMA)).fetchone()
            kind = conn.execute(KIND, (SCHEMA, "workflow_executions")).fetchone()
            to_version = conn.execute(render(VERSION, SCHEMA)).fetchone()[0]
        with Kestrel(dsn) as app:
            again = app.enqueue("seeded", idempotency_key="seed-10")
            new_id = app.enqueue("seeded", {"after": True})
    finally:
        drop_database(admin, dsn)
    during = [s for t, s in probe.ops if t0 <= t <= t1]
    checks = {name: (b, a) for name, b, a in zip(TRUTH_NAMES, before, after, strict=True)}
    result: dict[str, Any] = {
        "old_commit": old_commit,
        "from_version": from_version,
        "to_version": to_version,
        "applied": applied,
        "executions": executions,
        "live": live,
        "seed_s": round(seed_s, 1),
        "migrate_s": round(migrate_s, 2),
        "workflow_executions_kind": kind[0] if kind else None,
        "probe_ops_during": len(during),
        "probe_max_ms": round(1000 * max(during), 1) if during else None,
        "probe_p99_ms": round(1000 * percentile(during, 99), 1) if during else None,
        "probe_errors": probe.errors[:5],
        "probe_error_count": len(probe.errors),
        "checks": {k: [int(v[0]), int(v[1])] for k, v in checks.items()},
        "rows_unchanged": before == after,
        "old_key_deduplicated": keyed is not None and again == keyed[0],
        "new_enqueue_id": new_id,
    }
    return result
