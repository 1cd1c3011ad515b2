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
    " AND application_name = 'kestrel-listener' AND query LIKE 'LISTEN %'"
)
NOTIFY = sql.SQL("SELECT pg_notify({}, %s)").format(sql.Literal(notify_channel("kestrel")))


@pytest.fixture
def listening(dsn: str, db: psycopg.Connection) -> Iterator[tuple[Listener, threading.Thread, threading.Event]]:
    """A listener for workflow 'mine', running in its thread until the test ends."""
    wake = threading.Event()
    settings = EngineSettings(dsn=dsn, schema="kestrel", transaction_pooling=False)
    listener = Listener(settings, {"mine"}, wake, logging.getLogger("test-listener"), "listener-test")
    thread = threading.Thread(target=listener.run, daemon=True)
    thread.start()
    wait_for(lambda: db.execute(LISTENING).fetchone(), what="the listener to LISTEN")
    wait_for(wake.is_set, what="the wake-up it gives as it starts listening")
    wake.clear()
    try:
        yield listener, thread, wake
    finally:
        listener.stop()
        thread.join(10)
        listener.close()


def test_a_notification_naming_its_workflow_wakes_it_and_others_do_not(listening, db: psycopg.Connection) -> None:
    listener, _, wake = listening
    db.execute(NOTIFY, ("someone-elses",))
    db.execute(NOTIFY, ("mine",))  # delivered in order: once this one woke it, the first was read
    wait_for(wake.is_set, what="the notification naming 'mine'")
    wake.clear()
    db.execute(NOTIFY, ("someone-elses",))
    db.execute(NOTIFY, ("mine",))
    wait_for(wake.is_set, what="the second notification naming 'mine'")


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
    """Its wait has no timeout: only ``stop`` ends it (a worker's stop waited up to half a
    second for the listener's last wait to time out, 480 ms in a test of one step)."""
    listener, thread, _ = listening
    listener.stop()
    thread.join(10)
    assert not thread.is_alive()
    wait_for(lambda: db.execute(LISTENING).fetchone() is None, what="its session to end")
    listener.stop()  # again: nothing happens
