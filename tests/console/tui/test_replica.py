"""The console on a streaming replica (issue 48): a private primary and a hot standby of it,
started here and shared by the module. Every read path (status, list, show, report, sql,
metrics, each TUI screen) runs on the standby with ``--read-dsn``, the lag is shown (the TUI's
header, a banner past ``--max-lag``, the CLI's note, the ``kestrel_replica_lag_seconds``
gauge), and actions go to the primary and are confirmed from it.

Lag is made on purpose: ``pg_wal_replay_pause()`` on the standby holds what it replays while
the primary goes on; ``pg_wal_replay_resume()`` lets it catch up.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import make_conninfo

from kestrel_console.metrics import serve
from kestrel_console.settings import Settings
from kestrel_console.tui.screens.approvals import ApprovalsScreen
from kestrel_console.tui.screens.dashboard import DashboardScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.screens.queues import QueuesScreen
from kestrel_console.tui.screens.schedules import SchedulesScreen
from kestrel_console.tui.screens.sql import SqlScreen
from kestrel_console.tui.widgets.banner import Banner
from kestrel_console.tui.widgets.confirm import ConfirmModal
from kestrel_core import Kestrel
from tests.cli.script import console as cli
from tests.private_pg import PrivateServer, new_private_server
from tests.seed import SeedFacts, seed_history
from tests.waiting import wait_for as wait_until

from .helpers import SIZE, console, fresh, give_reason, open_screen, wait_for
from .test_reports import report_by_keys
from .test_sql import run as run_sql

READER = "kt_replica_reader"


@dataclass
class Pair:
    primary: PrivateServer
    standby: PrivateServer
    primary_dsn: str
    standby_dsn: str  # as the superuser
    reader_dsn: str  # the standby, as a login granted kestrel_reader
    facts: SeedFacts

    def primary_conn(self) -> psycopg.Connection:
        return psycopg.connect(self.primary_dsn, autocommit=True, options="-c search_path=kestrel")

    def standby_conn(self) -> psycopg.Connection:
        return psycopg.connect(self.standby_dsn, autocommit=True, options="-c search_path=kestrel")

    def caught_up(self) -> None:
        """Wait until the standby replayed everything the primary wrote so far."""
        with self.primary_conn() as p:
            target = p.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0]
        with self.standby_conn() as s:
            wait_until(
                lambda: s.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)).fetchone()[0],
                timeout=30,
                what="the standby to replay the primary's writes",
            )

    def pause_replay(self) -> None:
        self.caught_up()
        with self.standby_conn() as s:
            s.execute("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        with self.standby_conn() as s:
            s.execute("SELECT pg_wal_replay_resume()")
        self.caught_up()


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    base = Path(tempfile.mkdtemp(prefix="kestrel-replica-"))
    base.chmod(0o755)  # the servers run as the postgres OS user when the tests run as root
    primary = new_private_server(base / "primary")
    standby: PrivateServer | None = None
    try:
        primary.start()
        primary_dsn = primary.create_database("postgres")
        with Kestrel(primary_dsn) as app:
            app.migrate()
        with psycopg.connect(primary_dsn, autocommit=True, options="-c search_path=kestrel") as conn:
            conn.execute(f"CREATE ROLE {READER} LOGIN IN ROLE kestrel_reader")
            facts = seed_history(conn)
        standby = primary.standby(base / "standby")
        standby.start()
        standby_dsn = make_conninfo(primary_dsn, port=str(standby.port))
        found = Pair(primary, standby, primary_dsn, standby_dsn, make_conninfo(standby_dsn, user=READER), facts)
        with found.primary_conn() as conn:
            # One commit replayed since the standby started: until then its lag is unknown
            # (no replay timestamp), and shown so.
            conn.execute("SELECT pg_current_xact_id()")
        found.caught_up()
        yield found
    finally:
        for server in (standby, primary):
            if server is not None:
                server.destroy()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def replaying(pair: Pair) -> Iterator[Pair]:
    """The pair with the standby replaying when the test starts and ends."""
    pair.resume_replay()
    try:
        yield pair
    finally:
        pair.resume_replay()


def test_the_cli_reads_on_the_replica_and_acts_on_the_primary(replaying: Pair, tmp_path: Path) -> None:
    pair = replaying
    # The replica with a read-only login, as docs/operations.md says: every read goes there.
    env = {"KESTREL_DSN": pair.primary_dsn, "KESTREL_READ_DSN": pair.reader_dsn}
    (tmp_path / "mine.sql").write_text(
        "-- description: enqueued now\nSELECT count(*) AS n FROM workflow_executions WHERE status = 'enqueued'\n"
    )
    reads = [
        ("status",),
        ("status", "--format", "json", "--all"),
        ("list", "--format", "json"),
        ("show", str(pair.facts.id("pending_approval")), "--format", "json"),
        ("report",),
        ("report", "pending-approvals", "--format", "json"),
        ("--queries", str(tmp_path), "report", "mine", "--format", "json"),
        ("sql", "--format", "json", "SELECT count(*) AS n FROM workflow_executions"),
    ]
    for args in reads:  # each read path works on a hot standby (read-only, no writes of any kind)
        done = cli(*args, env=env)
        assert done.returncode == 0, (args, done.stderr)
        if args != ("report",):  # the list of reports reads no database
            assert "read on the replica" in done.stderr and "0.0 s behind" in done.stderr, (args, done.stderr)
    ops = json.loads(cli("status", "--format", "json", "--all", env=env).stdout)
    assert ops["replica"] == {"lag_s": 0.0, "streaming": True}

    # Held back: the replica does not see what the primary did since; the note says how far behind.
    pair.pause_replay()
    with pair.primary_conn() as p, Kestrel(pair.primary_dsn) as app:
        before = p.execute("SELECT count(*) FROM workflow_executions").fetchone()[0]
        new_id = app.enqueue("remediate", {"pod": "replica-1"})
        listed = cli("list", "--format", "json", "--limit", "500", env=env)
        assert new_id not in {r["id"] for r in json.loads(listed.stdout)}
        counted = cli("sql", "--format", "json", "SELECT count(*) AS n FROM workflow_executions", env=env)
        assert json.loads(counted.stdout) == [{"n": before}]  # ad-hoc SQL defaults to the replica
        assert "behind the primary" in counted.stderr and "0.0 s behind" not in counted.stderr

        # An action goes to the primary (the replica could not take it) and says what it did there.
        cancelled = cli("cancel", str(new_id), env=env)
        assert cancelled.returncode == 0, cancelled.stderr
        assert p.execute("SELECT status FROM workflow_executions WHERE id = %s", (new_id,)).fetchone()[0] == "cancelled"

    pair.resume_replay()
    shown = json.loads(cli("show", str(new_id), "--format", "json", env=env).stdout)[0]
    assert shown["status"] == "cancelled"


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def _cancelled_total(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "kestrel_executions_finished_total" and sample.labels.get("status") == "cancelled"
    )


def test_metrics_read_on_the_replica_with_its_lag(replaying: Pair) -> None:
    pair = replaying
    endpoint = serve(Settings(dsn=pair.primary_dsn, read_dsn=pair.reader_dsn), "127.0.0.1:0", settle_s=0)
    try:
        first = _scrape(endpoint.port)
        assert first["kestrel_up"] == 1.0
        assert first["kestrel_replica_lag_seconds"] == 0.0  # caught up (however idle the primary)
        assert first["kestrel_replica_streaming"] == 1.0
        counted = _cancelled_total(endpoint.port)
        pair.pause_replay()
        with Kestrel(pair.primary_dsn) as app:
            app.cancel(app.enqueue("remediate", {"pod": "replica-metrics"}), by="test")
        wait_until(
            lambda: _scrape(endpoint.port)["kestrel_replica_lag_seconds"] > 0.5, timeout=20, what="the lag to show"
        )
        # The cancel finished on the primary during the lag: once replayed it is counted, not
        # skipped because the scrapes' windows went past its time while the replica lagged.
        pair.resume_replay()
        wait_until(lambda: _cancelled_total(endpoint.port) == counted + 1, timeout=20, what="the cancel counted")
    finally:
        endpoint.close()
    # On the primary itself, no replica lag series at all.
    endpoint = serve(Settings(dsn=pair.primary_dsn), "127.0.0.1:0", settle_s=0)
    try:
        assert "kestrel_replica_lag_seconds" not in _scrape(endpoint.port)
    finally:
        endpoint.close()


async def test_the_tui_reads_the_replica_shows_its_lag_and_confirms_actions_from_the_primary(
    replaying: Pair,
) -> None:
    pair = replaying
    with Kestrel(pair.primary_dsn) as app:
        target = app.enqueue("remediate", {"pod": "replica-tui"})
    pair.caught_up()
    tui = console(pair.primary_dsn, read_dsn=pair.reader_dsn, max_lag=1.0)
    async with tui.run_test(size=SIZE) as pilot:
        # Every screen reads on the hot standby without an error.
        await open_screen(pilot, "1", DashboardScreen)
        await wait_for(pilot, lambda: "replica lag 0.0 s" in tui.sub_title, what="the lag in the header")
        await open_screen(pilot, "3", ApprovalsScreen)
        screen = await open_screen(pilot, "2", ExecutionsScreen)
        await fresh(pilot, screen)
        assert screen.table.shown(str(target), "status") == "enqueued"
        screen.table.move_cursor(row=screen.table.get_row_index(str(target)))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(tui.screen, DetailScreen) and tui.screen.loads > 0)
        await pilot.press("q")
        for key, kind in (("6", QueuesScreen), ("7", SchedulesScreen)):
            await fresh(pilot, await open_screen(pilot, key, kind))
        # Ad-hoc SQL defaults to the replica (no --reader-dsn given), and so do the reports.
        sql = await open_screen(pilot, "4", SqlScreen)
        message = await run_sql(pilot, sql, "SELECT count(*) AS n FROM workflow_executions WHERE id = " + str(target))
        assert message.startswith("1 row · "), message
        sql.set_focus(None)  # the editor would take the screen key as text
        await open_screen(pilot, "1", DashboardScreen)
        _, message = await report_by_keys(pilot, "pending-approvals")
        assert message.startswith("pending-approvals: "), message
        await open_screen(pilot, "2", ExecutionsScreen)
        assert not [m for severity, m in tui.notices if severity == "error"]
        assert tui.screen.query_one(Banner).text == ""

        # The replica held back past --max-lag: the banner says so, the header shows the lag.
        pair.pause_replay()
        with Kestrel(pair.primary_dsn) as app:
            app.enqueue("remediate", {"pod": "replica-tui-2"})
        await wait_for(
            pilot,
            lambda: "behind the primary" in tui.screen.query_one(Banner).text,
            timeout=20,
            what="the lag banner",
        )
        assert "replica lag" in tui.sub_title and "replica lag 0.0 s" not in tui.sub_title

        # An action goes to the primary, and its result is the primary's answer; the list marks
        # the row the replica has not caught up with.
        screen.table.move_cursor(row=screen.table.get_row_index(str(target)))
        await pilot.press("c")
        await give_reason(pilot)
        await wait_for(pilot, lambda: isinstance(tui.screen, ConfirmModal))
        await pilot.press("y")
        await wait_for(pilot, lambda: any("on the primary now" in m for _, m in tui.notices), what="the result")
        assert any(f"on the primary now: {target} cancelled" in m for _, m in tui.notices)
        with pair.primary_conn() as p:
            assert (
                p.execute("SELECT status FROM workflow_executions WHERE id = %s", (target,)).fetchone()[0]
                == "cancelled"
            )
        await fresh(pilot, screen)
        assert screen.table.shown(str(target), "status") == "enqueued → cancelled on the primary (replica behind)"

        # Caught up: the banner goes, the row shows the replica's (now current) state, unmarked.
        pair.resume_replay()
        await wait_for(pilot, lambda: tui.screen.query_one(Banner).text == "", timeout=20, what="the banner gone")
        await wait_for(pilot, lambda: not tui.awaiting_replica, what="the replica to replay the action")
        await fresh(pilot, screen)
        assert screen.table.shown(str(target), "status") == "cancelled"
