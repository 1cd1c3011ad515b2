"""Regenerate the console screenshots in this folder: dashboard, timeline and approvals at
200x50 (dashboard.svg, timeline.svg, approvals.svg) and at 80x24 (dashboard-80x24.svg, ...).

Real workflows run by a real worker make the data: incident remediations (an RCA, a flaky
fix retried with backoff, an approval gate, a durable cool-down sleep, a PR), billing syncs
(some fail for good), a workflow no worker serves, and a worker killed mid-step so its lease
goes stale. Then the TUI is driven with Textual's Pilot and each screen saved as SVG.

    python docs/screenshots/make.py                  # a private embedded PostgreSQL
    python docs/screenshots/make.py --dsn "host=... user=..."   # a scratch database there

With ``--dsn`` the DSN must be allowed to CREATE DATABASE; the scratch database is dropped at
the end. Takes about 40 seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from kestrel_core import Kestrel  # noqa: E402

SIZES = {"": (200, 50), "-80x24": (80, 24)}  # file name suffix -> terminal size
SHOTS = ("dashboard", "timeline", "approvals")
OPERATOR = "alice"

_tries: dict[tuple[int, str], int] = {}


def analyze(alert: dict) -> dict:
    time.sleep(random.uniform(0.4, 0.9))
    return {"cause": "memory leak" if alert["pod"].startswith("api") else "disk full", "pod": alert["pod"]}


def make_fix(execution_id: int, rca: dict) -> dict:
    key = (execution_id, "fix")
    _tries[key] = _tries.get(key, 0) + 1
    time.sleep(random.uniform(0.3, 0.7))
    if execution_id % 3 == 0 and _tries[key] < 3:
        raise TimeoutError("kubectl rollout status timed out")
    return {"patch": f"restart {rca['pod']}", "risk": "low" if rca["cause"] == "memory leak" else "high"}


def open_pr(fix: dict) -> dict:
    time.sleep(random.uniform(0.5, 1.0))
    return {"pr": random.randint(100, 999), "title": fix["patch"]}


def remediate(ctx, alert):
    rca = ctx.step("rca", analyze, alert)
    fix = ctx.step("fix", make_fix, ctx.execution_id, rca, retries=3, backoff=0.4)
    decision = ctx.wait_for_approval("approve-fix", timeout=timedelta(days=2), details=fix)
    if not decision.approved:
        return {"rejected_by": decision.by}
    ctx.sleep("cool-down", timedelta(seconds=2))
    return ctx.step("open-pr", open_pr, fix)


def fetch(account: int) -> list:
    time.sleep(random.uniform(0.2, 0.6))
    if account % 7 == 0:
        raise ConnectionError("upstream 502")
    return [account, account * 10]


def post(rows: list) -> int:
    time.sleep(random.uniform(0.2, 0.5))
    return len(rows)


def slow_post(rows: list) -> int:
    time.sleep(3600)  # the worker running this is killed: its lease goes stale
    return len(rows)


def billing_sync(ctx, account):
    rows = ctx.step("fetch", fetch, account, retries=1, backoff=0.3)
    posted = ctx.step("post", slow_post if account == 4243 else post, rows)
    return {"posted": posted}


def build_app(dsn: str, workflows: tuple[str, ...] = ("remediate", "billing-sync")) -> Kestrel:
    """A Kestrel app on ``dsn`` running (some of) the workflows above."""
    k = Kestrel(dsn)
    for name, fn in (("remediate", remediate), ("billing-sync", billing_sync)):
        if name in workflows:
            k.workflow(name)(fn)
    return k


def wait_until(what: str, check, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def statuses(k: Kestrel, ids: list[int]) -> list[str]:
    return [k.get(i).status for i in ids]


def make_history(dsn: str) -> dict[str, int]:
    """Run the workflows for real; returns ids worth showing."""
    k = build_app(dsn)
    k.migrate()
    alerts = [
        {"pod": p, "severity": s}
        for p, s in [
            ("api-1", "high"),
            ("db-1", "critical"),
            ("api-2", "high"),
            ("cache-1", "medium"),
            ("api-3", "high"),
            ("api-4", "low"),
            ("db-2", "high"),
            ("api-5", "medium"),
        ]
    ]
    worker = k.worker(
        concurrency=6, lease=timedelta(seconds=5), worker_id="worker-1", poll_interval=0.2, sweep_interval=0.5
    ).start()
    try:
        incidents = [k.enqueue("remediate", a) for a in alerts]
        billing = k.enqueue_many("billing-sync", list(range(1, 15)))
        wait_until("the gates", lambda: all(s == "waiting" for s in statuses(k, incidents)))
        time.sleep(1.5)
        for eid in incidents[:3]:
            k.approve(eid, "approve-fix", by=OPERATOR, comment="lgtm")
        k.reject(incidents[3], "approve-fix", by="bob", comment="too risky on a Friday")
        for eid in incidents[4:5]:
            k.approve(eid, "approve-fix", by="carol", comment="ok")
        wait_until("the decided incidents", lambda: all(s == "success" for s in statuses(k, incidents[:5])))
        wait_until("billing", lambda: all(s in ("success", "error") for s in statuses(k, billing)))
        k.enqueue_many("nightly-report", [{"day": d} for d in ("mon", "tue")])  # no worker serves it
        k.enqueue_many("billing-sync", list(range(20, 23)), delay=timedelta(minutes=30))
    finally:
        worker.stop()

    # A second worker dies mid-step: its lease goes stale. worker-2 (incidents only) starts
    # before the lease lapses, so its first sweep finds nothing and the next is far away.
    env = {**os.environ, "KESTREL_SCREENS_DSN": dsn}
    doomed = subprocess.Popen([sys.executable, __file__, "--doomed-worker"], env=env)
    stuck = k.enqueue("billing-sync", 4243)
    wait_until("the doomed worker to run it", lambda: k.get(stuck).status == "running")
    time.sleep(1.0)
    doomed.send_signal(signal.SIGKILL)
    doomed.wait()
    incidents_only = build_app(dsn, ("remediate",))
    live = incidents_only.worker(
        concurrency=2, lease=timedelta(seconds=30), worker_id="worker-2", poll_interval=0.2, sweep_interval=600.0
    ).start()
    fresh = k.enqueue("remediate", {"pod": "api-9", "severity": "high"})
    wait_until("the new incident's gate", lambda: k.get(fresh).status == "waiting")
    time.sleep(3.5)  # the doomed worker's 3 s lease has lapsed
    k.close()
    flaky = [i for i in incidents[:3] if i % 3 == 0]  # their fix failed twice, then worked
    return {"timeline": (flaky or incidents)[0], "stuck": stuck, "_live": live}


def doomed_worker() -> None:
    app = build_app(os.environ["KESTREL_SCREENS_DSN"], ("billing-sync",))
    worker = app.worker(concurrency=1, lease=timedelta(seconds=3), worker_id="worker-9", poll_interval=0.2)
    worker.start()
    time.sleep(3600)


async def shoot(dsn: str, ids: dict, size: tuple[int, int], suffix: str) -> None:
    from kestrel_console.tui import KestrelConsole
    from kestrel_console.tui.screens.detail import DetailScreen

    tui = KestrelConsole(dsn=dsn, operator=OPERATOR, refresh=1.0)
    async with tui.run_test(size=size) as pilot:

        async def settle(screen) -> None:
            loads = screen.loads
            screen.refresh_data(force=True)
            deadline = time.monotonic() + 10
            while screen.loads <= loads and time.monotonic() < deadline:
                await pilot.pause(0.1)
            await pilot.pause(0.3)

        await settle(tui.screen)
        tui.save_screenshot(f"dashboard{suffix}.svg", str(HERE))
        detail = DetailScreen(ids["timeline"])
        await tui.push_screen(detail)
        await settle(detail)
        tui.save_screenshot(f"timeline{suffix}.svg", str(HERE))
        await pilot.press("q", "3")
        await settle(tui.screen)
        tui.save_screenshot(f"approvals{suffix}.svg", str(HERE))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="a server where a scratch database may be created")
    parser.add_argument("--doomed-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.doomed_worker:
        doomed_worker()
        return

    cluster = None
    if args.dsn:
        admin = args.dsn
    else:
        from kestrel_console.embedded_pg import LocalCluster

        cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="kestrel-screens-")), durable=False)
        cluster.start()
        admin = cluster.dsn
    name = f"kestrel_screens_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = make_conninfo(admin, dbname=name)
    ids: dict = {}
    try:
        ids = make_history(dsn)
        for suffix, size in SIZES.items():
            asyncio.run(shoot(dsn, ids, size, suffix))
            for shot in SHOTS:
                print(f"wrote {HERE / f'{shot}{suffix}.svg'}")
    finally:
        if ids.get("_live") is not None:
            ids["_live"].stop(grace=timedelta(seconds=1))
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if cluster is not None:
            cluster.destroy()


if __name__ == "__main__":
    main()
