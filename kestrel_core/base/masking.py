"""Passwords hidden from DSNs and the messages quoting them; every log line goes through first_line.

Two layers. When the DSN is known (``hide_secrets``, ``parser_reason``, ``describe_target``), its
password is read by libpq's own parser (psycopg's ``conninfo_to_dict``) and every spelling of it
(as typed, percent-decoded, each ``@``-separated piece) is replaced wherever it appears. Without
the DSN (``mask_dsn`` on any text), the spans that could hold a password are masked generously:
a malformed DSN has no exact parse, so a span runs as far as the password could, and masking too
much is the safe error.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict

from kestrel_core.base.describe import safe_str

MASK = "****"
# libpq's options that hold a secret.
SECRET_KEYS = ("password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key")

# A URL's scheme; its userinfo's password runs from the first ':' after it to the last '@' of
# the line: libpq stops at the first '@', a person meant the last, so both are inside.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _spelled(keyword: str) -> str:
    """A pattern for ``keyword`` as a URL's query may spell it: libpq percent-decodes the
    keywords of a query as well as their values (``?pass%77ord=`` is ``password=``), so each
    character may be itself or its %XX escape (either case: matched generously, libpq's
    keywords being case-sensitive)."""
    return "".join(
        "(?:" + "|".join(sorted({re.escape(c)} | {f"%{ord(v):02x}" for v in (c.lower(), c.upper())})) + ")"
        for c in keyword
    )


# password=... in the keyword form or a URL's query, however it is spelled around the '=' and
# whatever of its letters are percent-encoded.
_PASSWORD_KEY = re.compile(
    r"(?<![\w.-])(?:" + "|".join(_spelled(key) for key in SECRET_KEYS) + r")\s*=\s*", re.IGNORECASE
)
# Where an unquoted password ends: at the next option libpq knows, "key=" after a space or "&key="
# (a query). A password with an unquoted space, '&' or "word=" in it is still one secret.
_NEXT_KEY = re.compile(
    r"(?:\s+|&)(?=(?:"
    + "|".join(sorted((o.keyword.decode() for o in pq.Conninfo.get_defaults()), key=len, reverse=True))
    + r")\s*=)",
    re.IGNORECASE,
)


def _quoted_end(text: str, start: int) -> int:
    """The index after the closing quote of a keyword-form value opened at ``start`` (backslash
    escapes honoured), or the end of the text when it is unterminated."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "'":
            return i + 1
        i += 1
    return len(text)


def _keyword_spans(line: str) -> list[tuple[int, int]]:
    """The value spans of every ``password=`` in ``line``."""
    spans = []
    for match in _PASSWORD_KEY.finditer(line):
        start = match.end()
        end = _quoted_end(line, start) if line.startswith("'", start) else start
        if end == start or (end < len(line) and not line[end].isspace()):
            # Unquoted, or text glued to the closing quote (malformed): on to the next option.
            following = _NEXT_KEY.search(line, end)
            while following and _given_elsewhere(line, following.end(), match.start()):
                # A key given twice, one inside an unquoted password: libpq takes the later,
                # but the person likely typed the one after the password as part of it.
                following = _NEXT_KEY.search(line, following.end())
            end = following.start() if following else len(line.rstrip())
        if end > start:
            spans.append((start, end))
    return spans


_KEY_AT = re.compile(r"(\w+)\s*=")


def _given_elsewhere(line: str, at: int, before: int) -> bool:
    """Whether the option named at ``at`` in ``line`` is also given before index ``before``
    (ahead of the password) or after this one."""
    key = _KEY_AT.match(line, at)
    if key is None:
        return False
    given = re.compile(rf"(?<![\w.-]){re.escape(key[1])}\s*=", re.IGNORECASE)
    return given.search(line, 0, before) is not None or given.search(line, key.end()) is not None


def _url_spans(line: str) -> list[tuple[int, int]]:
    """The password span of every URL's userinfo in ``line``: from the ':' after the user to the
    last '@' of the line."""
    spans = []
    last_at = line.rfind("@")
    for match in _SCHEME.finditer(line):
        start = match.end()
        if last_at < start:
            continue
        colon = line.find(":", start, last_at)
        if colon >= 0:
            spans.append((colon + 1, last_at))
    return spans


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _mask_line(line: str) -> str:
    out, at = [], 0
    for start, end in _merged(_keyword_spans(line) + _url_spans(line)):
        out.append(line[at:start])
        out.append(MASK)
        at = end
    out.append(line[at:])
    return "".join(out)


def mask_dsn(text: str) -> str:
    """Hide every password in a DSN or in a message that quotes one (URL and keyword forms,
    malformed ones included), line by line."""
    return "\n".join(_mask_line(line) for line in text.split("\n"))


def first_line(exc: BaseException | str, dsn: str | None = None) -> str:
    """The first line of an error (its type name when it has no text), passwords masked: the
    form every log line and message quotes an exception in."""
    text = (exc if isinstance(exc, str) else safe_str(exc)).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    if dsn:
        line = hide_secrets(line, dsn)
    return mask_dsn(line)


def _secrets(dsn: str) -> set[str]:
    """Every spelling of every password ``dsn`` may hold: libpq's reading, and the generous spans
    of ``mask_dsn`` (as typed and percent-decoded), for a DSN libpq cannot parse."""
    found: set[str] = set()
    for line in dsn.split("\n"):
        for start, end in _keyword_spans(line) + _url_spans(line):
            raw = line[start:end]
            found.add(raw)
            if raw.startswith("'"):
                found.add(raw.strip("'").replace("\\'", "'").replace("\\\\", "\\"))
    try:
        password = conninfo_to_dict(dsn).get("password")
    except (psycopg.Error, UnicodeError):
        password = None
    if password:
        found.add(str(password))
    found |= {unquote(s, errors="surrogateescape") for s in found}
    return {s for s in found if s}


def hide_secrets(text: str, dsn: str) -> str:
    """``text`` with every password of ``dsn`` (and each '@'-separated piece of one: libpq
    reads 'user:pa@ss@host' as password 'pa' and host 'ss@host') replaced by ****. A piece of
    three characters or more is hidden wherever it appears; a shorter one wherever it stands
    alone (not inside a longer word: 'ab' of 'ab@cd' in 'host "cd@db"' is, in 'table' is not)."""
    pieces = set()
    for secret in _secrets(dsn):
        pieces.add(secret)
        pieces.update(p for p in re.split(r"[@\s&]", secret) if p)
    for piece in sorted(pieces, key=len, reverse=True):
        if len(piece) >= 3:
            text = text.replace(piece, MASK)
        else:
            text = re.sub(rf"(?<!\w){re.escape(piece)}(?!\w)", MASK, text)
    return text


def _unquoted(value: str) -> str:
    """A keyword-form value as libpq reads it: a quoted one without its quotes and escapes."""
    if value.startswith("'"):
        return re.sub(r"\\(.)", r"\1", value[1:-1] if value.endswith("'") and len(value) > 1 else value[1:])
    return value


def password_is_ambiguous(dsn: str) -> bool:
    """Whether libpq reads a password of ``dsn`` other than the one it seems to spell (a raw
    space, quote, '/', '&' or '%' in a URL's password, an unquoted space in the keyword form):
    then no message could name the rest of the DSN without part of the password in it."""
    try:
        parsed = conninfo_to_dict(dsn)
    except (psycopg.Error, UnicodeError):
        return False  # refused as malformed anyway
    line = dsn.split("\n")[0]
    url = _SCHEME.match(line) is not None
    seemed = [
        unquote(line[start:end], errors="surrogateescape") if url else _unquoted(line[start:end])
        for start, end in _keyword_spans(line) + _url_spans(line)
    ]
    if url and "@" in line:
        userinfo = line[_SCHEME.match(line).end() : line.rfind("@")]  # type: ignore[union-attr]
        user = unquote(userinfo.split(":", 1)[0], errors="surrogateescape")
        if user and parsed.get("user") != user:
            return True
    return any(parsed.get("password") != value for value in seemed) or len(dsn.split("\n")) > 1


def parser_reason(dsn: str, exc: Exception) -> str:
    """libpq's complaint about a DSN it could not parse, without any secret: its messages quote
    the offending token ('invalid percent-encoded token: "s3cr%zz"'), which may be (part of) the
    password and hold quotes itself, so everything from the first quote to the last is hidden."""
    text = first_line(exc).replace('"="', "\0")
    first, last = text.find('"'), text.rfind('"')
    if first >= 0:
        text = text[:first] + '"' + MASK + '"' + (text[last + 1 :] if last > first else "")
    return mask_dsn(hide_secrets(text.replace("\0", '"="'), dsn))


def connection_reason(dsn: str, exc: Exception) -> str:
    """libpq's reason for a failed connection (a parsed DSN: it names hosts, not tokens), with
    every spelling of the DSN's password hidden."""
    return mask_dsn(hide_secrets(first_line(exc), dsn))
