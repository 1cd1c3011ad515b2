"""The project's targets for this 2-core machine, checked against what a run measured.

Throughput (raised once group commit came), recovery, the dashboard and batch enqueue; single
enqueues against a plain one-row INSERT (a goal and a floor) and, fed that way, against DBOS;
throughput kept under a held snapshot and over a growing history (MVCC). bench/README.md says
where each came from and what was measured against it.
"""

from __future__ import annotations

from typing import Any

from .report import fmt
from .workloads import NOOP1, NOOP5

TARGET_WF_S = {NOOP1: 3000.0, NOOP5: 1000.0}
TARGET_VS_CEILING = {NOOP1: 1.5}
TARGET_VS_DBOS = 10.0
TARGET_COMMITS_PER_WF = {NOOP1: 1.0}
TARGET_DISPATCH_P50_MS = 10.0
TARGET_RECOVERY_OVER_LEASE_S = 2.0
TARGET_DASHBOARD_P95_MS = 20.0
TARGET_ENQUEUE_ROWS_S = 20_000
TARGET_INGEST_VS_PLAIN = 1.0  # single enqueues / a plain one-row INSERT, same threads
FLOOR_INGEST_VS_PLAIN = 0.8
TARGET_HOLD_RATIO = 0.8  # last minute of a held snapshot / baseline of the same run
TARGET_SOAK_RATIO = 0.9  # last 5 minutes / first 5 with retention on
TARGET_BUCKETS_VS_NONE = 0.9  # issue 48: the bucketed claim within 10 % of today's


def _buckets(tp: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            f"{r['buckets']} bucket group(s) >= {TARGET_BUCKETS_VS_NONE:g}x today's claim ({tp['workers']} workers)",
            f"{r['vs_no_buckets']}x",
            r["vs_no_buckets"] is not None and r["vs_no_buckets"] >= TARGET_BUCKETS_VS_NONE,
        ]
        for r in tp["bucket_rows"]
        if r["buckets"] is not None
    ]


def _throughput(tp: dict[str, Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for r in tp["rows"]:
        k = r["kestrel"]
        workflow, run = k["workflow"], f"({k['workflow']}, {k['workers']} worker(s))"
        if workflow in TARGET_WF_S:
            goal, rate = TARGET_WF_S[workflow], k["workflows_per_s"]
            out.append([f"Kestrel >= {goal:,.0f} wf/s {run}", f"{fmt(rate)} wf/s", rate >= goal])
        if workflow in TARGET_VS_CEILING and r.get("kestrel_vs_ceiling") is not None:
            goal = TARGET_VS_CEILING[workflow]
            vs = r["kestrel_vs_ceiling"]
            out.append([f"Kestrel >= {goal:g}x its pgbench ceiling {run}", f"{vs}x", vs >= goal])
        if r.get("kestrel_vs_dbos") is not None:
            vs = r["kestrel_vs_dbos"]
            out.append([f"Kestrel >= {TARGET_VS_DBOS:g}x DBOS {run}", f"{vs}x", vs >= TARGET_VS_DBOS])
        if workflow in TARGET_COMMITS_PER_WF and k.get("commits_per_workflow") is not None:
            goal = TARGET_COMMITS_PER_WF[workflow]
            commits = k["commits_per_workflow"]
            out.append([f"commits per workflow < {goal:g} {run}", fmt(commits), commits < goal])
    return out


def _fed(tp: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            f"fed by single enqueues: Kestrel >= {TARGET_VS_DBOS:g}x DBOS "
            f"({r['kestrel']['workflow']}, {r['kestrel']['workers']} worker(s))",
            f"{r['kestrel_vs_dbos']}x",
            r["kestrel_vs_dbos"] >= TARGET_VS_DBOS,
        ]
        for r in tp.get("fed_rows", [])
        if r.get("kestrel_vs_dbos") is not None
    ]


def _ingest(ingest: dict[str, Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for r in ingest["rows"]:
        for goal, what in ((TARGET_INGEST_VS_PLAIN, "goal"), (FLOOR_INGEST_VS_PLAIN, "floor")):
            out.append(
                [
                    f"single enqueues ({r['source']}) >= {goal:g}x a plain INSERT ({what})",
                    f"{r['kestrel_vs_plain']}x",
                    r["kestrel_vs_plain"] >= goal,
                ]
            )
    return out


def _ratio(what: str, ratio: float, target: float, of: str) -> list[Any]:
    return [f"{what} >= {target:g}x the {of}", f"{ratio}x", ratio >= target]


def targets(results: dict[str, dict[str, Any]]) -> list[list[Any]]:
    """The issues' targets against what this run measured: [target, measured, met]."""
    out: list[list[Any]] = []
    if results.get("throughput", {}).get("bucket_rows"):
        out += _buckets(results["throughput"])
    elif results.get("throughput"):
        out += _throughput(results["throughput"]) + _fed(results["throughput"])
    lat = results.get("latency")
    if lat:
        p50 = lat["notify"]["p50_ms"]
        out.append(
            [f"dispatch p50 < {TARGET_DISPATCH_P50_MS:g} ms with NOTIFY", f"{p50} ms", p50 < TARGET_DISPATCH_P50_MS]
        )
    rec = results.get("recovery")
    if rec:
        out.append(
            [
                f"recovery within lease + {TARGET_RECOVERY_OVER_LEASE_S:g} s ({rec['lease_s']:g} s lease)",
                f"{rec['all_resumed_s']} s",
                rec["within_target"],
            ]
        )
    con = results.get("console")
    if con and "dashboard" in con:
        p95 = con["dashboard"]["p95_ms"]
        out.append(
            [
                f"dashboard refresh p95 < {TARGET_DASHBOARD_P95_MS:g} ms ({con['finished']:,} finished)",
                f"{p95} ms",
                p95 < TARGET_DASHBOARD_P95_MS,
            ]
        )
    enq = results.get("enqueue")
    if enq:
        out += _ingest(enq["ingest"])
        rate = enq["enqueue"]["bulk_rows_per_s"]
        out.append(
            [f"bulk enqueue >= {TARGET_ENQUEUE_ROWS_S:,} rows/s", f"{fmt(rate)} rows/s", rate >= TARGET_ENQUEUE_ROWS_S]
        )
    mv = results.get("mvcc")
    if mv and mv.get("ratio") is not None:
        what = f"held snapshot ({mv['hold_s']:g} s): last minute"
        out.append(_ratio(what, mv["ratio"], TARGET_HOLD_RATIO, "baseline"))
    soak = results.get("soak")
    if soak and soak.get("ratio") is not None:
        what = f"soak ({soak['minutes']:g} min, retention on): last window"
        out.append(_ratio(what, soak["ratio"], TARGET_SOAK_RATIO, "first"))
    return out
