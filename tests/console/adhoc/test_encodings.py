"""Issue 44, finding 1: what the guard parses is what the server lexes, in every encoding.

The guard parsed the Python text; psycopg then encoded it in the connection's client encoding
(the database's by default). In EUC_JP (Python's codec) and SJIS, ``¥`` is the byte 0x5C, a
backslash to the server, and in SJIS, BIG5, GBK, UHC, JOHAB, GB18030 and SHIFT_JIS_2004 many
characters end in 0x5C: ``SELECT E'¥' AS a, ' , CODE --' AS b`` was two literals to the guard
and ran CODE on the server (as an opted-in superuser it left the reader role). Now the session's
client encoding is pinned to UTF8 for each query, with the lexing settings, and the server's own
bytes of the text are compared with what was parsed.

Every test here failed on the code before the fix (the injected columns came back, or the
role was left); ``test_every_encoding`` loops over every encoding PostgreSQL has: server-side
ones as databases of that encoding, all of them as the client encoding of a UTF8 database
(with ``backslash_quote=on``, which makes the unsafe client encodings exploitable).
"""

from __future__ import annotations

import codecs
import functools
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg._encodings import pg2pyenc
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kestrel_console.adhoc import QueryFailed, QueryRefused
from kestrel_console.adhoc import run_read_only as _run_read_only
from kestrel_core import Kestrel
from tests.cli.script import console
from tests.conftest import ADMIN_DSN, drop_at_the_end

run_read_only = functools.partial(_run_read_only, allow_privileged=True)

# The payload: CODE leaves the reader role, then says who runs the query.
CODE = "set_config($$role$$, $$none$$, true) AS r, current_user::text AS u"


def payload(char: str, code: str = CODE) -> str:
    return f"SELECT E'{char}' AS a, ' , {code} --' AS b"


SERVER_ENCODINGS = [
    "SQL_ASCII", "EUC_JP", "EUC_CN", "EUC_KR", "EUC_TW", "EUC_JIS_2004", "UTF8", "MULE_INTERNAL",
    "LATIN1", "LATIN2", "LATIN3", "LATIN4", "LATIN5", "LATIN6", "LATIN7", "LATIN8", "LATIN9", "LATIN10",
    "WIN1256", "WIN1258", "WIN866", "WIN874", "KOI8R", "WIN1251", "WIN1252", "ISO_8859_5", "ISO_8859_6",
    "ISO_8859_7", "ISO_8859_8", "WIN1250", "WIN1253", "WIN1254", "WIN1255", "WIN1257", "KOI8U",
]  # fmt: skip
CLIENT_ONLY_ENCODINGS = ["SJIS", "BIG5", "GBK", "UHC", "GB18030", "JOHAB", "SHIFT_JIS_2004"]
ALL_ENCODINGS = SERVER_ENCODINGS + CLIENT_ONLY_ENCODINGS


def test_the_lists_are_every_encoding_of_the_server(db: psycopg.Connection) -> None:
    names = db.execute(
        "SELECT pg_encoding_to_char(i) FROM generate_series(0, 100) i WHERE pg_encoding_to_char(i) <> ''"
    ).fetchall()
    assert sorted(name for (name,) in names) == sorted(ALL_ENCODINGS)
    # SERVER_ENCODINGS are those a database may have: encoding_databases makes one of each.


@functools.cache
def dangerous(encoding: str, most: int = 3) -> list[str]:
    """``¥`` and up to ``most`` characters that Python's codec for ``encoding`` turns into bytes
    holding an ASCII byte (0x5C and friends): the desync's raw material."""
    found = ["¥"]
    if encoding == "SQL_ASCII" or not python_codec(encoding):
        return found
    python = pg2pyenc(encoding.encode())
    encoder = codecs.getencoder(python)
    for code in range(0x80, 0x10000):
        char = chr(code)
        if 0xD800 <= code < 0xE000:
            continue
        try:
            data = encoder(char)[0]
        except UnicodeEncodeError:
            continue
        if any(byte < 0x80 for byte in data) and char not in found:
            found.append(char)
            if len(found) > most:
                break
    return found


def outcome(conn: psycopg.Connection, query: str) -> tuple[str, object]:
    """("ran", (columns, rows)), or ("refused"/"failed", the reason)."""
    try:
        result = run_read_only(conn, query)
    except QueryRefused as exc:
        return "refused", exc.reason
    except QueryFailed as exc:
        return "failed", str(exc)
    return "ran", (result.columns, result.rows)


def assert_not_injected(conn: psycopg.Connection, char: str, where: str) -> None:
    kind, what = outcome(conn, payload(char))
    if kind == "ran":
        # The server read what the guard read: two literals, the second holding CODE as text.
        assert what == (["a", "b"], [(char, f" , {CODE} --")]), (where, char, what)
    else:  # a character the database's encoding has no place for: refused or failed, no bypass
        assert "reader" not in str(what), (where, char, what)
    # Whatever happened, the session is as it was: its own encoding, its own role.
    (who,) = conn.execute("SELECT current_user::text").fetchone() or (None,)
    who = who.decode() if isinstance(who, bytes) else who  # SQL_ASCII: psycopg gives bytes
    assert who == conninfo_to_dict(ADMIN_DSN)["user"], (where, char, who)


@pytest.fixture(scope="module")
def euc_jp(migrated: str) -> Iterator[str]:
    """A migrated Kestrel database whose encoding is EUC_JP."""
    name = f"kestrel_eucjp_{uuid.uuid4().hex[:8]}"
    dsn = make_conninfo(ADMIN_DSN, dbname=name)
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} ENCODING 'EUC_JP' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0").format(
                sql.Identifier(name)
            )
        )
    with Kestrel(dsn) as app:
        app.migrate()
    try:
        yield dsn
    finally:
        drop_at_the_end(dsn)


def test_euc_jp_database_the_yen_sign_is_not_a_backslash(euc_jp: str) -> None:
    with psycopg.connect(euc_jp, autocommit=True) as conn:
        assert conn.info.encoding == "euc_jp"
        kind, what = outcome(conn, payload("¥"))
        # EUC_JP has no ¥ of its own (PostgreSQL's table): the server says so, nothing runs.
        assert (kind, what) == (
            "failed",
            'character with byte sequence 0xc2 0xa5 in encoding "UTF8" has no equivalent in encoding "EUC_JP"',
        )
        # A character EUC_JP has, on each side of the guard the same text.
        assert outcome(conn, payload("表")) == ("ran", (["a", "b"], [("表", f" , {CODE} --")]))
        assert conn.info.encoding == "euc_jp"  # the pin was for the transaction only


def test_euc_jp_database_from_the_cli_and_a_report(euc_jp: str, tmp_path: Path) -> None:
    done = console("--allow-privileged-sql", "sql", "--format", "json", payload("¥"), env={"KESTREL_DSN": euc_jp})
    assert (done.returncode, done.stdout) == (1, ""), done
    assert done.stderr.strip().splitlines()[-1].startswith("error: character with byte sequence 0xc2 0xa5"), done
    (tmp_path / "yen.sql").write_text(f"-- description: yen\n{payload('表')}\n", encoding="utf-8")
    ran = console(
        "--allow-privileged-sql", "--queries", str(tmp_path), "report", "yen", "--format", "json",
        env={"KESTREL_DSN": euc_jp},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert '"b": " , set_config($$role$$' in ran.stdout and '"u"' not in ran.stdout


SJIS_ENV = {"PGCLIENTENCODING": "SJIS", "PGOPTIONS": "-c backslash_quote=on"}


def test_sjis_client_with_backslash_quote_on(dsn: str, tmp_path: Path) -> None:
    with psycopg.connect(dsn, autocommit=True, client_encoding="SJIS", options="-c backslash_quote=on") as conn:
        for char in ["¥", "表", "ソ", "能"]:
            assert outcome(conn, payload(char)) == ("ran", (["a", "b"], [(char, f" , {CODE} --")])), char
        assert conn.info.encoding == "shift_jis"
    done = console(
        "--allow-privileged-sql", "sql", "--format", "json", payload("¥"), env={"KESTREL_DSN": dsn, **SJIS_ENV}
    )
    assert done.returncode == 0, done.stderr
    assert '"a": "¥"' in done.stdout and '"u"' not in done.stdout, done.stdout
    (tmp_path / "sjis.sql").write_text(f"-- description: sjis\n{payload('表')}\n", encoding="utf-8")
    ran = console(
        "--allow-privileged-sql", "--queries", str(tmp_path), "report", "sjis", "--format", "json",
        env={"KESTREL_DSN": dsn, **SJIS_ENV},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert '"a": "表"' in ran.stdout and '"u"' not in ran.stdout, ran.stdout


async def test_sjis_client_on_the_tui_sql_screen(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kestrel_console.tui.screens.sql import SqlScreen
    from tests.console.tui.helpers import SIZE, open_screen
    from tests.console.tui.helpers import console as tui_console
    from tests.console.tui.test_sql import run

    for key, value in SJIS_ENV.items():
        monkeypatch.setenv(key, value)
    tui = tui_console(dsn, allow_privileged_sql=True)
    async with tui.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot, "4", SqlScreen)
        message = await run(pilot, screen, payload("¥"))
        assert message.startswith("1 row"), message
        assert screen.result is not None and screen.result.columns == ["a", "b"]
        assert screen.result.rows == [("¥", f" , {CODE} --")]


@pytest.fixture(scope="module")
def encoding_databases(migrated: str) -> Iterator[dict[str, str]]:
    """One database per server encoding (C locale, from template0), holding a schema the reader
    role may use (roles are cluster-wide: the migrated template made kestrel_reader)."""
    made: dict[str, str] = {}
    try:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
            for encoding in SERVER_ENCODINGS:
                name = f"kestrel_enc_{encoding.lower()}_{uuid.uuid4().hex[:8]}"
                dsn = make_conninfo(ADMIN_DSN, dbname=name)
                admin.execute(
                    sql.SQL("CREATE DATABASE {} ENCODING {} LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0").format(
                        sql.Identifier(name), sql.Literal(encoding)
                    )
                )
                made[encoding] = dsn
                with psycopg.connect(dsn, autocommit=True, client_encoding=setup_encoding(encoding)) as conn:
                    conn.execute("CREATE SCHEMA kestrel")
                    conn.execute("GRANT USAGE ON SCHEMA kestrel TO kestrel_reader")
        yield made
    finally:
        for dsn in made.values():
            drop_at_the_end(dsn)


def test_every_encoding(dsn: str, encoding_databases: dict[str, str]) -> None:
    ran = 0
    for encoding in SERVER_ENCODINGS:
        # The database's own encoding as the client's (the default; UTF8 where Python has no
        # codec for it, as psycopg needs one), and unsafe settings.
        client = {} if python_codec(encoding) else {"client_encoding": setup_encoding(encoding)}
        options = "-c backslash_quote=on"
        with psycopg.connect(encoding_databases[encoding], autocommit=True, options=options, **client) as conn:
            if encoding == "MULE_INTERNAL":  # no conversion to UTF8 exists: refused, in one line
                kind, what = outcome(conn, "SELECT 1")
                assert kind == "refused" and str(what).startswith(
                    "the database's encoding MULE_INTERNAL cannot be read as UTF8 ("
                ), what
                continue
            for char in dangerous(encoding):
                assert_not_injected(conn, char, f"database {encoding}")
            assert outcome(conn, "SELECT 'plain' AS a") == ("ran", (["a"], [("plain",)]))
            ran += 1
    for encoding in ALL_ENCODINGS:
        if not python_codec(encoding):
            continue  # MULE_INTERNAL, EUC_TW: psycopg cannot talk in them
        client = make_conninfo(dsn, client_encoding=encoding, options="-c backslash_quote=on")
        with psycopg.connect(client, autocommit=True) as conn:
            for char in dangerous(encoding):
                assert_not_injected(conn, char, f"client {encoding}")
            ran += 1
    assert ran == len(SERVER_ENCODINGS) - 1 + len(ALL_ENCODINGS) - 2


def setup_encoding(encoding: str) -> str:
    """A client encoding psycopg can talk in on a database of ``encoding`` (MULE_INTERNAL has no
    conversion to UTF8; with SQL_ASCII on one side, the server converts nothing)."""
    return "SQL_ASCII" if encoding == "MULE_INTERNAL" else "UTF8"


def python_codec(encoding: str) -> bool:
    try:
        pg2pyenc(encoding.encode())
    except psycopg.NotSupportedError:
        return False
    return True
