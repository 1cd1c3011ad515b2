"""The worker's LISTEN connection (kestrel_core/engine/listener.py): it wakes the claim loop for
its own workflows only, reconnects after its session is ended, and ends at ``stop`` while it
waits, with no timeout to run out first."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from kestrel_core.db.statements import notify_channel
from kestrel_core.engine.listener import Listener
from kestrel_core.workflow.contracts import EngineSettings
from tests.waiting import wait_for

LISTENING = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    " AND application_name = 'kestrel-listener' AND btrim(query, E' \n') LIKE 'LISTEN %'"
)
NOTIFY = sql.SQL("SELECT pg_notify({}, %s)").format(sql.Literal(notify_channel("kestrel")))


class CountedWake(threading.Event):
    """The claim loop's wake-up event, counting how often it is set: a wake-up the listener
    should not give shows as one more, whatever else set the event since."""

    def __init__(self) -> None:
        super().__init__()
        self.sets = 0

    def set(self) -> None:
        self.sets += 1
        super().set()


@pytest.fixture
def listening(dsn: str, db: psycopg.Connection) -> Iterator[tuple[Listener, threading.Thread, CountedWake]]:
    """A listener for workflow 'mine', running in its thread until the test ends (its wake-up
    as it starts listening already given and cleared)."""
    wake = CountedWake()
    settings = EngineSettings(dsn=dsn, schema="kestrel", transaction_pooling=False)
    listener = Listener(settings, {"mine"}, wake, logging.getLogger("test-listener"), "listener-test")
    thread = threading.Thread(target=listener.run, daemon=True)
    thread.start()
    wait_for(lambda: db.execute(LISTENING).fetchone(), what="the listener to LISTEN")
    wait_for(wake.is_set, what="the wake-up it gives as it starts listening")
    wake.clear()
    wake.sets = 0
    try:
        yield listener, thread, wake
    finally:
        listener.stop()
        thread.join(10)
        listener.close()


def test_a_notification_naming_its_workflow_wakes_it_and_others_do_not(listening, db: psycopg.Connection) -> None:
    _, _, wake = listening
    for n in (1, 2):
        db.execute(NOTIFY, ("someone-elses",))
        # Delivered in order: once this one woke it, the first was read, and gave no wake-up.
        db.execute(NOTIFY, ("mine",))
        wait_for(wake.is_set, what=f"notification {n} naming 'mine'")
        assert wake.sets == n, "a notification for another workflow woke the claim loop"
        wake.clear()


def test_it_listens_again_after_its_session_is_ended(listening, db: psycopg.Connection) -> None:
    _, _, wake = listening
    (first,) = db.execute(LISTENING).fetchone()
    db.execute("SELECT pg_terminate_backend(%s)", (first,))
    wait_for(lambda: (row := db.execute(LISTENING).fetchone()) and row[0] != first, what="a new LISTEN session")
    wait_for(wake.is_set, what="the wake-up it gives as it listens again")
    wake.clear()
    db.execute(NOTIFY, ("mine",))
    wait_for(wake.is_set, what="a wake-up on the new session")


def test_stop_ends_it_while_it_waits_for_a_notification(listening, db: psycopg.Connection) -> None:
    """Its wait has no timeout: only ``stop`` ends it (with a timed wait, every worker's stop
    waited for the listener's last wait to run out)."""
    listener, thread, _ = listening
    listener.stop()
    thread.join(10)
    assert not thread.is_alive()
    wait_for(lambda: db.execute(LISTENING).fetchone() is None, what="its session to end")
    listener.stop()  # again: nothing happens
