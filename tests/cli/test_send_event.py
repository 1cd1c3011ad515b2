"""`kestrel-console send-event KEY --payload JSON` wakes a waiting execution."""

from __future__ import annotations

import subprocess

import psycopg

from tests.cli.script import console
from tests.seed import awaiting_payment
from tests.waiting import wait_for


def cli(dsn: str, *args: str) -> subprocess.CompletedProcess:
    return console(*args, dsn=dsn)


def test_send_event_wakes_the_waiting_execution(dsn: str, db: psycopg.Connection) -> None:
    with awaiting_payment(dsn) as (app, eid):
        sent = cli(dsn, "send-event", "payment:A-17", "--payload", '{"amount": 30}', "--operator", "alice")
        assert sent.returncode == 0, sent.stderr
        assert sent.stdout.startswith("sent event ") and "(payment:A-17)" in sent.stdout
        wait_for(lambda: app.get(eid).done)
        assert app.get(eid).output == {"amount": 30}
        assert db.execute("SELECT key, payload, sent_by FROM workflow_events").fetchall() == [
            ("payment:A-17", {"amount": 30}, "alice")
        ]


def test_send_event_refuses_bad_json_with_exit_2_and_sends_nothing(dsn: str, db: psycopg.Connection) -> None:
    bad = cli(dsn, "send-event", "k", "--payload", "{nope")
    assert bad.returncode == 2
    assert "not valid JSON" in bad.stderr
    assert db.execute("SELECT count(*) FROM workflow_events").fetchone() == (0,)
