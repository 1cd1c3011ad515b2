"""Kestrel installs only into a schema of its own (issue 44, finding 10).

``migrate --schema public`` used to revoke PUBLIC's EXECUTE from every function already in
``public``, breaking the other applications there. Now ``migrate`` refuses, with one line and
exit 1, a schema that holds objects Kestrel did not create, ``public`` itself, and a schema
other roles may create objects in (Kestrel's SECURITY DEFINER functions resolve names there);
and ``ensure_roles`` changes the privileges of Kestrel's own objects only.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from kestrel_core import ActionRefused, Kestrel
from kestrel_core.db.roles import RoleNames, ensure_roles
from tests.cli.script import console
from tests.core.test_roles import drop_roles

OTHER_APP = "CREATE FUNCTION {}.other_app() RETURNS int LANGUAGE sql AS 'SELECT 1'"
PUBLIC_MAY_RUN = "SELECT has_function_privilege('public', %s, 'EXECUTE')"


def public_may_run(conn: psycopg.Connection, function: str) -> bool:
    return bool(conn.execute(PUBLIC_MAY_RUN, (function,)).fetchone()[0])


def one_line_refusal(args: tuple[str, ...], dsn: str, needle: str) -> None:
    done = console(*args, dsn=dsn)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in done.stderr, done.stderr


def test_migrate_refuses_the_public_schema_and_leaves_its_functions_alone(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(OTHER_APP.format("public"))
        one_line_refusal(
            ("--schema", "public", "migrate"), database, "refusing to install Kestrel into schema 'public'"
        )
        with Kestrel(database, schema="public") as app, pytest.raises(ActionRefused, match="object"):
            app.migrate()
        assert public_may_run(conn, "public.other_app()")
        assert conn.execute("SELECT to_regclass('public.schema_migrations')").fetchone() == (None,)
        conn.execute("DROP FUNCTION public.other_app()")
        # even an empty public: it is everyone's
        one_line_refusal(
            ("--schema", "public", "migrate"), database, "refusing to install Kestrel into schema 'public'"
        )


def test_migrate_refuses_a_schema_holding_other_objects_or_open_to_other_roles(database: str) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA shared_app")
        conn.execute("CREATE TABLE shared_app.orders (id int)")
        one_line_refusal(("--schema", "shared_app", "migrate"), database, "holds 1 object(s) Kestrel did not create")
        conn.execute("CREATE SCHEMA open_app")
        conn.execute("GRANT CREATE ON SCHEMA open_app TO PUBLIC")
        one_line_refusal(("--schema", "open_app", "migrate"), database, "CREATE granted to PUBLIC")
        assert conn.execute("SELECT to_regclass('open_app.schema_migrations')").fetchone() == (None,)
        # an empty schema only its owner writes to (made ready by a DBA) is fine
        conn.execute("CREATE SCHEMA own_app")
        done = console("--schema", "own_app", "migrate", "--no-roles", dsn=database)
        assert done.returncode == 0, done.stderr
        # and once Kestrel's, opening it to others is refused at the next migrate
        conn.execute("GRANT CREATE ON SCHEMA own_app TO PUBLIC")
        one_line_refusal(("--schema", "own_app", "migrate"), database, "other roles may create objects in it")
        conn.execute("REVOKE CREATE ON SCHEMA own_app FROM PUBLIC")


def test_ensure_roles_changes_only_the_privileges_of_kestrels_own_objects(database: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    names = RoleNames(worker=f"kt_w_{suffix}", operator=f"kt_o_{suffix}", reader=f"kt_r_{suffix}")
    with psycopg.connect(database, autocommit=True) as conn:
        with Kestrel(database, schema="own_roles") as app:
            app.migrate(roles=False)
        # what an admin adds to Kestrel's schema later is theirs: its grants are left as they are
        conn.execute(OTHER_APP.format("own_roles"))
        conn.execute("CREATE TABLE own_roles.admin_notes (note text)")
        conn.execute("GRANT SELECT ON own_roles.admin_notes TO PUBLIC")
        try:
            ensure_roles(conn, "own_roles", names)
            assert public_may_run(conn, "own_roles.other_app()")
            assert not public_may_run(conn, "own_roles.decide_approval(bigint, text, boolean, text, text)")
            assert conn.execute(
                "SELECT has_table_privilege(%s, 'own_roles.admin_notes', 'SELECT'),"
                " has_table_privilege('public', 'own_roles.admin_notes', 'SELECT'),"
                " has_table_privilege(%s, 'own_roles.workflow_executions', 'SELECT')",
                (names.reader, names.reader),
            ).fetchone() == (True, True, True)  # the reader's SELECT on admin_notes: PUBLIC's
            acl = conn.execute("SELECT relacl::text FROM pg_class WHERE oid = 'own_roles.admin_notes'::regclass")
            assert names.reader not in acl.fetchone()[0]
        finally:
            conn.execute("DROP SCHEMA own_roles CASCADE")
            drop_roles(conn, (names.worker, names.operator, names.reader))
