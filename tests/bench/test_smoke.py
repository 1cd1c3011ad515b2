"""Smoke runs of every benchmark at tiny sizes, so the benchmarks cannot rot.

They check that each benchmark runs end to end against the real server and reports what it
measured (all executions succeeded, samples counted, JSON written); the numbers themselves
are noise at these sizes and are not asserted against the issue's targets.
"""

from __future__ import annotations

import json
import pstats
import re
import shutil
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from bench import buckets as buckets_bench
from bench import ceiling, fleet, pgstats, suite
from bench.__main__ import main
from bench.databases import fresh_database
from bench.targets import targets
from bench.workloads import NOOP1, NOOP5
from kestrel_core.db.statements import render
from kestrel_core.dispatch.claim import CLAIM, START_KEY
from tests.conftest import ADMIN_DSN, in_ci, require_extension


@pytest.fixture
def printed() -> list[str]:
    """What the benchmark printed (its tables)."""
    return []


@pytest.fixture
def opts(tmp_path: Path, printed: list[str]) -> suite.Options:
    return suite.Options.quick(admin=ADMIN_DSN, results=tmp_path, echo=printed.append)


def _json(opts: suite.Options, name: str) -> dict:
    return json.loads((Path(opts.results) / f"{name}.json").read_text())


def test_throughput_runs_every_execution_on_kestrel(opts: suite.Options, printed: list[str]) -> None:
    opts.ceiling = False
    opts.dbos = False
    data = suite.throughput(opts)
    assert [r["kestrel"]["workflow"] for r in data["rows"]] == [NOOP1, NOOP5]
    for row in data["rows"]:
        k = row["kestrel"]
        assert sum(k["per_worker"].values()) == opts.n  # every execution ran, all on our workers
        assert set(k["per_worker"]) == {"bench-w0"}
        assert k["workflows_per_s"] > 0 and k["steps_per_s"] == pytest.approx(
            k["workflows_per_s"] * k["steps"], rel=0.01
        )
        # What Postgres wrote for it (the quick run's short settle may add the warm-up's writes).
        writes = k["postgres"]["writes"]
        assert writes["operation_outputs"]["inserts"] >= opts.n * k["steps"]
        assert writes["workflow_executions"]["inserts"] >= opts.n
        assert k["commits_per_workflow"] > 0  # below 1 once commits are shared (group commit)
        if k["statements_skipped"]:
            assert k["statements_per_workflow"] is None and "shared_preload_libraries" in k["statements_skipped"]
        else:
            assert k["statements_per_workflow"] > 0
    assert _json(opts, "throughput")["rows"][1]["kestrel"]["steps"] == 5
    # The one-step workload fed by single enqueue calls from threads while the workers ran.
    (fed,) = data["fed_rows"]
    k = fed["kestrel"]
    assert k["feed_threads"] == opts.feed_threads and sum(k["per_worker"].values()) == opts.n
    assert k["workflows_per_s"] > 0 and k["enqueue_calls_per_s"] > 0 and k["rows_per_batch"] >= 1
    assert fed["bulk_workflows_per_s"] == data["rows"][0]["kestrel"]["workflows_per_s"]
    # The same workers fed by plain one-row INSERTs from as many threads: the reference.
    plain = fed["plain"]
    assert plain["fed_by"] == "plain INSERT" and k["fed_by"] == "Kestrel.enqueue"
    assert plain["feed_threads"] == opts.feed_threads and sum(plain["per_worker"].values()) == opts.n
    assert plain["workflows_per_s"] > 0 and fed["kestrel_vs_plain"] > 0
    assert any("plain-INSERT-fed wf/s" in text for text in printed)
    assert any("Fed by single enqueues from 8 threads" in text for text in printed)
    assert any("Kestrel wf/s" in text and "commits/wf" in text for text in printed)
    assert any("Postgres writes per workflow" in text and "operation_outputs" in text for text in printed)


def test_throughput_profiles_every_worker_thread(opts: suite.Options, printed: list[str], tmp_path: Path) -> None:
    opts.ceiling = opts.dbos = False
    opts.workloads = (NOOP1,)
    opts.profile = tmp_path / "profiles"
    data = suite.throughput(opts)
    assert data["rows"][0]["kestrel"]["profiled"]
    files = sorted(p.name for p in opts.profile.glob("*.pstats"))
    assert files == ["noop1-bench-w0.pstats"]
    assert any(text.startswith("Top 15 by cumulative") for text in printed)
    # The steps run on the worker's pool threads: counted only if every thread was profiled.
    stats = pstats.Stats(str(opts.profile / files[0])).stats  # type: ignore[attr-defined]
    calls = sum(v[1] for (path, _, name), v in stats.items() if name == "noop" and path.endswith("workloads.py"))
    assert calls >= opts.n


def test_ceiling_script_uses_the_engine_statements_for_each_step() -> None:
    text = ceiling.script(5)
    assert "%(" not in text
    # claim, open s0, then per step one boundary (each one opens the next; the last completes)
    assert text.count("\\gset c_") == 1 and text.count("\\gset o_") == 5
    assert text.count('INSERT INTO "kestrel".operation_outputs') == 6
    assert len(set(re.findall(r":step\d", text))) == 5


def test_ceiling_claim_walks_the_enqueued_index_as_pgbench_runs_it() -> None:
    """With the engine's planner setting (PGOPTIONS, as pgbench gets it) the claim reads the
    head of the ready table's claim index on a big analyzed backlog, not a sort of all of it."""
    assert ceiling.session_options("SET LOCAL enable_sort = off") == "-c enable_sort=off"
    with pytest.raises(ValueError):
        ceiling.session_options("SET enable_sort = off; SELECT 1")
    with fresh_database(ADMIN_DSN) as dsn:
        with psycopg.connect(dsn, autocommit=True, options=ceiling.PGOPTIONS) as conn:
            conn.execute(render(ceiling.SEED, ceiling.SCHEMA), {"name": NOOP1, "n": 5000})
            conn.execute(render(ceiling.ANALYZE, ceiling.SCHEMA))
            params = {
                "names": [NOOP1],
                "versions": [None],
                "queues": None,
                "buckets": None,
                "n": 1,
                "worker_id": "o",
                "lease": "30 seconds",
            }
            params |= {"after_p": START_KEY[0], "after_at": START_KEY[1], "after_id": START_KEY[2]}
            plan = json.dumps(
                conn.execute(
                    b"EXPLAIN (FORMAT JSON) " + render(CLAIM, ceiling.SCHEMA).as_bytes(conn), params
                ).fetchone()[0]
            )
    assert "executions_ready_claim_idx" in plan and '"Sort"' not in plan


def test_pgstats_counts_writes_and_says_how_to_count_statements() -> None:
    assert pgstats.preloaded("pg_stat_statements") and pgstats.preloaded("'auto_explain', pg_stat_statements")
    assert pgstats.preloaded('"$libdir/pg_stat_statements.so"') and not pgstats.preloaded("")
    assert not pgstats.preloaded("pg_stat_statements_extra")
    with fresh_database(ADMIN_DSN) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            loaded = pgstats.preloaded(conn.execute(pgstats.PRELOAD).fetchone()[0])
            reason = pgstats.statements_unavailable(conn)
            assert (reason is None) == loaded and (loaded or reason == pgstats.HOW_TO_ENABLE)
            if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_stat_statements'").fetchone():
                conn.execute(pgstats.CREATE_EXTENSION)  # the view exists even when not loaded:
                conn.execute("EXPLAIN " + pgstats.STATEMENTS)  # its columns are the ones we read
            before = pgstats.snapshot(conn, "kestrel", statements=loaded)
            conn.execute(
                "INSERT INTO kestrel.workflow_executions (workflow_name) SELECT 'x' FROM generate_series(1, 4)"
            )
            conn.execute("UPDATE kestrel.workflow_executions SET updated_at = now()")  # no index on it
        with psycopg.connect(dsn, autocommit=True) as conn:
            pgstats.wait_backends_gone(conn)  # the session that wrote has published its counters
            d = pgstats.delta(before, pgstats.snapshot(conn, "kestrel", statements=loaded), 4)
    w = d["writes"]["workflow_executions"]
    assert (w["inserts"], w["updates"], w["deletes"]) == (4, 4, 0) and w["inserts_per_workflow"] == 1.0
    assert d["commits_per_workflow"] >= 0.5 and (d["statements_per_workflow"] is None) == (not loaded)


@pytest.mark.skipif(ceiling.pgbench_binary() is None, reason="pgbench is not installed")
def test_ceiling_runs_the_engine_statements_in_pgbench() -> None:
    r = ceiling.run_ceiling(ADMIN_DSN, NOOP5, clients=2, threads=1, seconds=1)
    assert r["executions"] > 0 and r["failed"] == 0
    assert r["steps_per_s"] == pytest.approx(r["workflows_per_s"] * 5, rel=0.01)


def test_dbos_runs_the_same_workload() -> None:
    pytest.importorskip("dbos")
    from bench.peer import run_dbos

    r = run_dbos(ADMIN_DSN, NOOP5, workers=1, concurrency=4, n=40)
    assert r["per_worker"] == {"dbos-w0": 40} and r["workflows_per_s"] > 0
    assert r["steps_per_s"] == pytest.approx(r["workflows_per_s"] * 5, rel=0.01)
    fed = run_dbos(ADMIN_DSN, NOOP1, workers=1, concurrency=4, n=40, feed_threads=4)
    assert fed["per_worker"] == {"dbos-w0": 40} and fed["enqueue_calls_per_s"] > 0


def test_latency_measures_every_probe(opts: suite.Options) -> None:
    data = suite.latency(opts)
    assert data["notify"]["n"] == opts.samples and data["polling"]["n"] == opts.poll_samples
    assert 0 < data["notify"]["p50_ms"] <= data["notify"]["max_ms"]
    # Polling only, a probe waits at most one poll interval (x1.2 jitter) plus the work.
    assert data["polling"]["max_ms"] < opts.poll_interval * 1200 + 1000
    assert _json(opts, "latency")["polling"]["listen"] is False


def test_recovery_resumes_every_execution_after_the_lease(opts: suite.Options) -> None:
    data = suite.recovery(opts)
    assert data["resumed"] == opts.recovery_executions
    # Nothing may resume while the killed worker's lease still holds it.
    assert data["first_resumed_s"] >= data["lease_left_at_kill_s"] - 0.05
    assert data["all_resumed_s"] >= data["first_resumed_s"]


def test_console_times_the_dashboard(opts: suite.Options) -> None:
    import kestrel_console.read  # noqa: F401  (the project's own module: missing is a failure)

    data = suite.console(opts)
    assert data["dashboard"]["n"] == opts.dashboard_samples
    assert {"status_counts", "queue_depth", "activity"} <= set(data["queries"])


def test_enqueue_and_memory(opts: suite.Options, printed: list[str]) -> None:
    data = suite.enqueue(opts)
    assert data["enqueue"]["rows"] == opts.enqueue_rows and data["enqueue"]["bulk_rows_per_s"] > 0
    ingest = data["ingest"]["rows"]
    assert [r["source"] for r in ingest] == ["8 threads", "8 asyncio tasks"]
    for r in ingest:
        assert r["plain_per_s"] > 0 and r["kestrel_per_s"] > 0 and r["rows_per_batch"] >= 1
        assert r["kestrel_vs_plain"] == pytest.approx(
            r["kestrel_per_s"] / r["plain_per_s"], abs=0.01
        )  # rounded to 2 places
    assert ingest[0]["per_call_per_s"] > 0  # the one-commit-per-call path, measured alongside
    assert any("Single enqueue calls" in text and "enqueue/plain" in text for text in printed)
    mem = data["memory"]
    assert mem["concurrency"] == 32 and 0 < mem["rss_mib"] <= mem["peak_rss_mib"]


def test_cli_runs_a_benchmark_and_refuses_unknown_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The quickest benchmark: the CLI path is what is tested (test_enqueue_and_memory runs enqueue).
    assert main(["--quick", "--admin-dsn", ADMIN_DSN, "--results", str(tmp_path), "console"]) == 0
    out = capsys.readouterr().out
    assert "dashboard refresh p95" in out and (tmp_path / "summary.json").exists()
    with pytest.raises(SystemExit) as exc:
        main(["nonsense"])
    assert exc.value.code == 2


def test_targets_are_the_issues() -> None:
    from bench.targets import targets

    row1 = {
        "kestrel": {"workflow": NOOP1, "workers": 2, "workflows_per_s": 3100.0, "commits_per_workflow": 0.8},
        "kestrel_vs_ceiling": 1.4,
        "kestrel_vs_dbos": 12.0,
    }
    row5 = {
        "kestrel": {"workflow": NOOP5, "workers": 2, "workflows_per_s": 900.0, "commits_per_workflow": 3.0},
        "kestrel_vs_ceiling": 2.0,
        "kestrel_vs_dbos": None,
    }
    fed = {"kestrel": {"workflow": NOOP1, "workers": 2}, "kestrel_vs_dbos": 6.9}
    ingest = {
        "rows": [{"source": "8 threads", "kestrel_vs_plain": 0.85}, {"source": "64 threads", "kestrel_vs_plain": 1.5}]
    }
    measured = targets(
        {
            "throughput": {"rows": [row1, row5], "fed_rows": [fed]},
            "enqueue": {"ingest": ingest, "enqueue": {"bulk_rows_per_s": 30_000}},
        }
    )
    assert {target: ok for target, _, ok in measured} == {
        "Kestrel >= 3,000 wf/s (noop1, 2 worker(s))": True,
        "Kestrel >= 1.5x its pgbench ceiling (noop1, 2 worker(s))": False,
        "Kestrel >= 10x DBOS (noop1, 2 worker(s))": True,
        "commits per workflow < 1 (noop1, 2 worker(s))": True,
        "Kestrel >= 1,000 wf/s (noop5, 2 worker(s))": False,
        "fed by single enqueues: Kestrel >= 10x DBOS (noop1, 2 worker(s))": False,
        "single enqueues (8 threads) >= 1x a plain INSERT (goal)": False,
        "single enqueues (8 threads) >= 0.8x a plain INSERT (floor)": True,
        "single enqueues (64 threads) >= 1x a plain INSERT (goal)": True,
        "single enqueues (64 threads) >= 0.8x a plain INSERT (floor)": True,
        "bulk enqueue >= 20,000 rows/s": True,
    }


def test_a_ratio_of_nothing_done_is_zero_not_unknown() -> None:
    """A hold that finished nothing is 0x (it fails its target); it read as unknown ("-"), which
    the targets skip, and failed the mvcc smoke run once on a loaded machine."""
    from bench.report import ratio

    assert ratio(0.0, 250.0) == 0.0
    assert ratio(500.0, 250.0) == 2.0
    assert ratio(None, 250.0) is None and ratio(500.0, None) is None and ratio(500.0, 0.0) is None


def test_workers_compares_a_fleet_with_the_baseline(opts: suite.Options, printed: list[str]) -> None:
    """``python -m bench workers`` at 4 workers (baseline 4): every figure read, ratios of 1-ish."""
    require_extension("pg_stat_statements")  # loaded by the fleet's private server
    data = suite.workers(opts)
    small, big = data["baseline"], data["fleet"]
    assert small["workers"] == big["workers"] == opts.fleet.count
    for run in (small, big):
        assert run["backends"] >= run["workers"]  # each worker its own connections
        assert run["load"]["claimed"] >= 1 and run["load"]["p50_ms"] is not None
        assert run["idle"]["samples"] >= 1 and run["load"]["samples"] >= 1
        assert "other" in run["load"]["duties"]  # the workflows' own statements were counted
    assert data["ratios"]["workers"] == 1.0
    assert any("workers against" in text for text in printed)
    assert _json(opts, "workers")["fleet"]["workers"] == opts.fleet.count


def test_workers_through_pgbouncer_share_the_pools_backends(opts: suite.Options) -> None:
    """``python -m bench workers --through-pgbouncer``: the workers poll through a PgBouncer
    started for the run, so the server holds the pool's backends, not ~6 per worker."""
    require_extension("pg_stat_statements")
    if shutil.which("pgbouncer") is None and not Path("/usr/sbin/pgbouncer").exists():
        if in_ci():
            pytest.fail("CI has PgBouncer (.ci/run installs it)")
        pytest.skip("pgbouncer is not installed")
    data = suite.workers(replace(opts, fleet=replace(opts.fleet, through_pgbouncer=True)))
    for run in (data["baseline"], data["fleet"]):
        assert run["through_pgbouncer"]
        assert run["backends"] <= fleet.POOLED_BACKENDS + 2  # the pool's, the bench's own
        assert run["load"]["claimed"] >= 1 and run["load"]["p50_ms"] is not None


def test_buckets_measures_each_variant_in_its_window() -> None:
    """``python -m bench throughput --buckets``: one short variant (the real windows are 10 s
    or more, refused below), its workers sharing two groups, and the table of ratios."""
    run = buckets_bench.run_variant(ADMIN_DSN, buckets=2, workers=2, concurrency=4, n=4000, window=1.0)
    assert run["workflows_per_s"] > 0 and run["backlog_left"] > 0
    assert set(run["per_worker"]) == {"bench-b0", "bench-b1"}
    with pytest.raises(ValueError, match="at least 10"):
        buckets_bench.compare(
            ADMIN_DSN, buckets_bench.Buckets((1,), n=1, window=5.0, rounds=1), workers=1, concurrency=1
        )
    rows = [
        {"buckets": None, "median_workflows_per_s": 100.0, "runs": [100.0], "vs_no_buckets": 1.0},
        {"buckets": 16, "median_workflows_per_s": 95.0, "runs": [95.0], "vs_no_buckets": 0.95},
    ]
    text = buckets_bench.table(rows, 2, 64, 12.0, [1.5, 2.0])
    assert "none" in text and "0.95" in text and "load average 1.5-2.0" in text
    (target,) = targets({"throughput": {"workers": 2, "bucket_rows": rows}})
    assert target[0].startswith("16 bucket group(s) >= 0.9x") and target[2] is True
