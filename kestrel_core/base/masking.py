"""Passwords hidden from DSNs and the messages quoting them; every log line goes through first_line."""

from __future__ import annotations

import re

import psycopg
from psycopg.conninfo import conninfo_to_dict

# user:password@ of a URL. A malformed URL may hold spaces, quotes or '@' in its password: the
# password runs to the '@' after which the host holds no other '@'.
_URL_PASSWORD = re.compile(r"(://[^:/@\s'\"]*:)([^\n]*?)(@)(?=[^@\s'\"]*(?:[\s'\"]|$))")
# password=... in the keyword form or a URL's query: a quoted value (to its closing quote, or to
# the end when it is unterminated), else the words up to the next "key=" (a password with an
# unquoted space is still one secret).
_KEYWORD_PASSWORD = re.compile(
    r"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&'\"]+(?:\s+(?![\w.-]+\s*=)[^\s&=]+)*)", re.IGNORECASE
)
_QUOTED = re.compile(r'"([^"]*)"')


def mask_dsn(text: str) -> str:
    """Hide every password in a DSN or in a message that quotes one (URL and keyword forms,
    malformed ones included)."""
    text = _URL_PASSWORD.sub(r"\1****\3", text)
    return _KEYWORD_PASSWORD.sub(r"\1****", text)


def first_line(exc: BaseException | str, dsn: str | None = None) -> str:
    """The first line of an error (its type name when it has no text), passwords masked: the
    form every log line and message quotes an exception in."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    if dsn:
        line = hide_secrets(line, dsn)
    return mask_dsn(line)


def _secrets(dsn: str) -> list[str]:
    """Every password ``dsn`` may hold, read generously (a malformed DSN has no exact parse)."""
    found = []
    start = dsn.find("://")
    if start >= 0:
        rest = dsn[start + 3 :]
        userinfo = rest[: rest.rfind("@")] if "@" in rest else ""
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    for match in _KEYWORD_PASSWORD.finditer(dsn):
        found.append(match.group(2).strip("'"))
    try:
        password = conninfo_to_dict(dsn).get("password")
    except psycopg.Error:
        password = None
    if password:
        found.append(str(password))
    return [s for s in found if s]


def hide_secrets(text: str, dsn: str) -> str:
    """``text`` with every password of ``dsn`` (and each '@'-separated piece of one: libpq
    reads 'user:pa@ss@host' as password 'pa' and host 'ss@host') replaced by ****, where it
    stands as a token of its own."""
    pieces = set()
    for secret in _secrets(dsn):
        pieces.add(secret)
        pieces.update(p for p in secret.split("@") if len(p) >= 3)
    for piece in sorted(pieces, key=len, reverse=True):
        text = re.sub(r"(?<![\w%])" + re.escape(piece) + r"(?![\w%])", "****", text)
    return text


def parser_reason(dsn: str, exc: Exception) -> str:
    """libpq's complaint about ``dsn``, without any secret: its messages quote the offending
    token ('invalid percent-encoded token: "s3cr%zz"'), which may be (part of) the password."""
    text = first_line(exc)
    secrets = _secrets(dsn)

    def hide(match: re.Match[str]) -> str:
        quoted = match.group(1)
        if any(quoted and (quoted in s or s in quoted) for s in secrets):
            return '"****"'
        return match.group(0)

    return mask_dsn(hide_secrets(_QUOTED.sub(hide, text), dsn))
