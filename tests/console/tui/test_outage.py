"""The database goes away and comes back: a banner says so and the console keeps retrying,
on the same screen with the data it last read, then carries on."""

from __future__ import annotations

import psycopg

from kestrel_console.embedded_pg.process import free_port
from kestrel_console.tui.screens.executions import ExecutionsScreen
from kestrel_console.tui.widgets.banner import Banner
from kestrel_core import Kestrel
from tests.seed import seed_history

from .helpers import SIZE, console, fresh, wait_for


async def test_survives_the_database_going_away_and_coming_back(private_cluster):
    dsn = private_cluster.create_database("tui_outage")
    with Kestrel(dsn) as k:
        k.migrate()
    with psycopg.connect(dsn, autocommit=True, options="-c search_path=kestrel") as conn:
        facts = seed_history(conn)

    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        screen = tui.screen
        assert isinstance(screen, ExecutionsScreen)
        await fresh(pilot, screen)
        shown = screen.table.keys()
        assert len(shown) == len(facts.executions)
        banner = screen.query_one(Banner)
        assert banner.text == ""

        private_cluster.stop()
        await wait_for(pilot, lambda: tui.db_problem is not None, timeout=15, what="the banner")
        assert tui.db_problem[0] == "down"
        assert "database unreachable" in banner.text and "retrying" in banner.text
        assert tui.screen is screen and screen.table.keys() == shown  # the screen keeps its data
        failures = tui._failures
        await wait_for(pilot, lambda: tui._failures > failures, timeout=5, what="another retry")

        private_cluster.start()
        await wait_for(pilot, lambda: tui.db_problem is None, timeout=20, what="the database to be back")
        assert banner.text == ""
        assert any("reachable again" in m for _, m in tui.notices)
        assert tui.screen is screen
        with Kestrel(dsn) as k:
            new_id = k.enqueue("billing-sync", {"after": "outage"})
        await fresh(pilot, screen)
        assert screen.table.keys()[0] == str(new_id)


async def test_starts_without_a_database_and_says_so():
    port = free_port()  # nothing listens on it
    tui = console(f"host=127.0.0.1 port={port} user=postgres dbname=nowhere connect_timeout=2")
    async with tui.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: tui.db_problem is not None, timeout=10, what="the banner")
        banner = tui.screen.query_one(Banner)
        assert "database unreachable" in banner.text and f"127.0.0.1:{port}" in banner.text
        await pilot.press("2")  # the console still works: screens switch, the banner follows
        assert isinstance(tui.screen, ExecutionsScreen)
        await wait_for(pilot, lambda: "database unreachable" in tui.screen.query_one(Banner).text)
        await pilot.press("q")
    assert tui.return_code == 0
