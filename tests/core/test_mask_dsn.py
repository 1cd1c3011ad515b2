"""Passwords never leak from a DSN, well-formed or not (issue 9)."""

from __future__ import annotations

import re
from urllib.parse import quote

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel_core import DatabaseUnavailable, mask_dsn
from kestrel_core.base.masking import connection_reason, first_line
from kestrel_core.db.connection import connect, describe_target, make_pool, unavailable
from tests.hostile_text import NOT_UTF8_DSNS

SECRET = "Sx9zq"


@pytest.mark.parametrize(
    "dsn, masked",
    [
        (f"postgresql://bob:{SECRET}@db.example/app", "postgresql://bob:****@db.example/app"),
        (f"postgresql://bob:{SECRET}%zz@db.example/app", "postgresql://bob:****@db.example/app"),  # bad escape
        (f"postgresql://bob:{SECRET} more@db.example/app", "postgresql://bob:****@db.example/app"),  # space
        (f"postgresql://bob:{SECRET}@at@db.example/app", "postgresql://bob:****@db.example/app"),  # '@'
        (f'postgresql://bob:{SECRET}"q@db.example/app', "postgresql://bob:****@db.example/app"),  # quote
        (
            f"postgresql://bob@db.example/app?password={SECRET}&sslmode=disable",
            "postgresql://bob@db.example/app?password=****&sslmode=disable",
        ),
        (f"host=db.example password={SECRET} user=bob", "host=db.example password=**** user=bob"),
        (f"host=db.example password='{SECRET} x' user=bob", "host=db.example password=**** user=bob"),
        (f"host=db.example password = {SECRET} more user=bob", "host=db.example password = **** user=bob"),
        (f"host=db.example password='{SECRET} user=bob", "host=db.example password=****"),  # unterminated
        (f"host=db.example PASSWORD={SECRET}", "host=db.example PASSWORD=****"),
        # a key given twice, the second inside an unquoted password (found by Hypothesis)
        (f"host=db user='u' password=\" user={SECRET} dbname=db", "host=db user='u' password=**** dbname=db"),
    ],
)
def test_mask_dsn_hides_the_password_of_every_form(dsn: str, masked: str) -> None:
    assert mask_dsn(dsn) == masked
    assert SECRET not in mask_dsn(dsn)


def test_mask_dsn_inside_a_message_keeps_the_rest() -> None:
    text = f"invalid DSN 'postgresql://bob:{SECRET}@h/db': failed to resolve host 'h'"
    assert mask_dsn(text) == "invalid DSN 'postgresql://bob:****@h/db': failed to resolve host 'h'"


MALFORMED = [
    f"postgresql://bob:{SECRET}%zz@127.0.0.1:5432/app",
    f"postgresql://bob:{SECRET} {SECRET}@127.0.0.1:5432/app",
    f"postgresql://bob:{SECRET}@{SECRET}@127.0.0.1:5432/app",
    f"host=127.0.0.1 password='{SECRET} user=bob",
    f"host=127.0.0.1 password=x {SECRET} user=bob",
    f"postgresql://bob@127.0.0.1/app?password={SECRET}%zz",
]


@pytest.mark.parametrize("dsn", [*MALFORMED, *NOT_UTF8_DSNS])  # the same SECRET
def test_connect_and_pool_refuse_a_malformed_dsn_without_quoting_the_secret(dsn: str) -> None:
    for attempt in (lambda: connect(dsn, connect_timeout=2), lambda: make_pool(dsn, min_size=1, max_size=1)):
        with pytest.raises(DatabaseUnavailable) as caught:
            attempt()
        assert SECRET not in str(caught.value)
        assert "invalid DSN" in str(caught.value)
    assert SECRET not in describe_target(dsn)


def test_unavailable_hides_a_password_libpq_quotes_back() -> None:
    dsn = f"postgresql://bob:{SECRET}@127.0.0.1:1/app"
    exc = Exception(f'could not connect: password "{SECRET}" rejected for {SECRET}')
    message = str(unavailable(dsn, exc))
    assert SECRET not in message and "127.0.0.1:1/app" in message


# Issue 44 (9): generated DSNs, both forms, with passwords holding what the hand-written regexes
# missed (spaces, quotes, '@', '&', '"', '=', '%'-escapes good and bad, bytes that are not UTF-8).
MARK = "Zq9X"
_PIECES = [*" '\"@&%=:/\\?#+;,{}", "a", "%40", "%zz", "%FF", "\udcff", "é", "user=", "host="]
_fragment = st.lists(st.sampled_from(_PIECES), max_size=4).map("".join)
_password = st.tuples(_fragment, _fragment).map(lambda t: t[0] + MARK + t[1])
_user = st.lists(st.sampled_from(_PIECES), max_size=3).map(lambda parts: "u" + "".join(parts))


def _encoded(text: str) -> str:
    return quote(text.encode("utf-8", "surrogateescape"), safe="")


def _kw_quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@st.composite
def _encoded_keyword(draw: st.DrawFn) -> str:
    """``password`` or ``sslpassword`` with some of its letters as %XX (hex in either case):
    libpq percent-decodes a URL query's keywords too (``?pass%77ord=`` is ``password=``)."""
    keyword = draw(st.sampled_from(["password", "sslpassword"]))
    flags = draw(st.lists(st.sampled_from(["plain", "lower", "upper"]), min_size=len(keyword), max_size=len(keyword)))
    return "".join(
        c if how == "plain" else (f"%{ord(c):02x}" if how == "lower" else f"%{ord(c):02X}")
        for c, how in zip(keyword, flags, strict=True)
    )


@st.composite
def generated_dsns(draw: st.DrawFn) -> str:
    password, user, keyword = draw(_password), draw(_user), draw(_encoded_keyword())
    return draw(
        st.sampled_from(
            [
                f"postgresql://{user}:{password}@127.0.0.1:1/db",
                f"postgresql://{_encoded(user)}:{_encoded(password)}@127.0.0.1:1/db",
                f"host=127.0.0.1 port=1 user={_kw_quoted(user)} password={password} dbname=db",
                f"host=127.0.0.1 port=1 password={_kw_quoted(password)} user={_kw_quoted(user)}",
                f"host=127.0.0.1 port=1 sslpassword={password} user=u",
                f"postgresql://{user}@127.0.0.1:1/db?password={password}&sslmode=disable",
                f"postgresql://127.0.0.1:1/db?password={_encoded(password)}&sslmode=disable",
                f"postgresql://127.0.0.1:1/db?{keyword}={_encoded(password)}&sslmode=disable",
                f"postgresql://u@127.0.0.1:1/db?{keyword}={_encoded(password)}&user={_encoded(user)}",
                f"postgresql://127.0.0.1:1/db?{keyword}={password}",
            ]
        )
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated_dsns())
def test_no_generated_dsn_shows_its_password_anywhere(dsn: str) -> None:
    """mask_dsn alone and inside a message, the target named in errors, and the error of
    connecting (malformed, ambiguous or unreachable: port 1 refuses at once)."""
    outputs = [mask_dsn(dsn), mask_dsn(f"invalid DSN '{dsn}': bad"), describe_target(dsn)]
    with pytest.raises(DatabaseUnavailable) as caught:
        connect(dsn, connect_timeout=1).close()
    outputs.append(str(caught.value))
    for output in outputs:
        assert MARK not in output, (dsn, output)


# Issue 44 (9, second review): a password with '@' in it, split into pieces of every length
# (libpq reads 'u:ab@cd@host' as password 'ab' and host 'cd@host', and says so): no piece may
# stand in any output, not even one or two characters long. Greek letters: no message has them.
_GREEK = "αβγδεζηθικλμνξπρστυφχψω"
_piece = st.text(alphabet=_GREEK, min_size=1, max_size=4)
_at_password = st.lists(_piece, min_size=2, max_size=3).map("@".join)


def _standing(piece: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(piece)}(?!\w)", text) is not None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_at_password, st.sampled_from(["raw", "encoded", "keyword", "quoted", "query"]))
def test_no_piece_of_a_password_with_at_signs_is_shown(password: str, form: str) -> None:
    dsn = {
        "raw": f"postgresql://u:{password}@127.0.0.1:1/db",
        "encoded": f"postgresql://u:{_encoded(password)}@127.0.0.1:1/db",
        "keyword": f"host=127.0.0.1 port=1 user=u password={password} dbname=db",
        "quoted": f"host=127.0.0.1 port=1 password={_kw_quoted(password)} user=u",
        "query": f"postgresql://u@127.0.0.1:1/db?password={_encoded(password)}",
    }[form]
    outputs = [mask_dsn(dsn), describe_target(dsn)]
    with pytest.raises(DatabaseUnavailable) as caught:
        connect(dsn, connect_timeout=1).close()
    outputs.append(str(caught.value))
    # what libpq itself says, quoted by a log line (first_line) or a connection error
    try:
        psycopg.connect(dsn, connect_timeout=1).close()
    except psycopg.Error as exc:
        outputs += [first_line(exc, dsn), connection_reason(dsn, exc)]
    for output in outputs:
        for piece in password.split("@"):
            assert not _standing(piece, output), (dsn, piece, output)
