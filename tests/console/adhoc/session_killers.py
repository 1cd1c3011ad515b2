"""An admin's helpers that kill a session, added to the Kestrel schema after Kestrel was
installed: what the ad-hoc guard must never let the reader role run (test_live_names.py,
test_fuzz_grammar.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tests.conftest import admin_objects


@contextmanager
def session_killers(dsn: str, victim: str, concat: str, concat_definition: str) -> Iterator[None]:
    """For the test's time: ``kestrel.kill_session(pid)`` (SECURITY DEFINER), the operator
    ``kestrel.+ (text, text)`` over ``kestrel.<concat>(a text, b text) RETURNS text`` (defined by
    ``concat_definition``: its LANGUAGE and body), and the view ``kestrel.session_killer`` the
    reader role may SELECT; each kills the sessions whose application_name is ``victim``."""
    create = f"""
CREATE OR REPLACE FUNCTION kestrel.kill_session(pid integer) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER AS $$ SELECT pg_terminate_backend(pid) $$;
CREATE OR REPLACE FUNCTION kestrel.{concat}(a text, b text) RETURNS text
    {concat_definition};
DROP OPERATOR IF EXISTS kestrel.+ (text, text);
CREATE OPERATOR kestrel.+ (LEFTARG = text, RIGHTARG = text, FUNCTION = kestrel.{concat});
CREATE OR REPLACE VIEW kestrel.session_killer AS
    SELECT pid, pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = '{victim}';
GRANT SELECT ON kestrel.session_killer TO kestrel_reader;
"""
    drop = f"""
DROP VIEW IF EXISTS kestrel.session_killer;
DROP OPERATOR IF EXISTS kestrel.+ (text, text);
DROP FUNCTION IF EXISTS kestrel.{concat}(text, text);
DROP FUNCTION IF EXISTS kestrel.kill_session(integer);
"""
    with admin_objects(dsn, create, drop):
        yield
