"""Layer 1 of the read-only guard: refuse, before anything reaches Postgres, SQL that is not
exactly one read, or that names a function not known to be free of side effects.

Operators type ad-hoc SQL and run report files other people wrote; both go through here first,
then through ``session.run_read_only`` (layer 2: a READ ONLY transaction that is always rolled
back; layer 3: run as the read-only role ``kestrel_reader``, session state released after).
Layer 2 stops every write to tables; this layer also stops what a read-only transaction allows
but an operator console must not do: signalling other sessions, reading the server's files,
session advisory locks, running SQL given as text, and so on.

How a query is checked:

1. ``_skeleton`` scans the text the way the PostgreSQL lexer does (nested ``/* */``
   comments, ``E''`` and dollar quoting, ``standard_conforming_strings = on``, which
   ``run_read_only`` enforces) and blanks every comment and string literal. What remains is
   exactly the code Postgres will see, so sqlglot cannot be fooled by lexing tricks that hide
   a call inside what it takes for a comment or a string.
2. The skeleton is split on ``;`` (one statement only), EXPLAIN's options are peeled off,
   simple ``SHOW name`` is let through, and the rest is parsed by sqlglot (postgres dialect).
3. One function per rule checks the tree: statement kind, data-modifying CTEs,
   ``SELECT ... INTO``, locking clauses, and functions: every call and every attribute
   reference (``t.f``, ``(x).f``: Postgres reads them as ``f(t)`` when ``f`` is not a column)
   in any position is checked against the allowlist (``allowlist``: pg_catalog functions that
   are IMMUTABLE or STABLE, minus a reviewed list; regenerate it with ``allowlist_build.py``,
   whose docstring says how). Anything else is refused with its name and why.
4. A lexical pass over the skeleton checks every ``name(``, ``schema.name(`` and ``.name``
   as written, independent of how sqlglot named it (``ifnull(`` is not ``coalesce(``).

``SHOW`` is allowed in its simple form (``SHOW name``, ``SHOW ALL``, ``SHOW TIME ZONE``...):
it only reads a setting. ``SET``/``RESET`` are refused. ``pg_sleep`` is allowed: the
statement timeout bounds it. ``currval``/``lastval`` are allowed: they read session state.
Names a query leaves unqualified (an attribute call ``(x).f`` of a function not in the
catalog, an overload ``lower(int)``, an operator, a type) resolve through the search path
``run_read_only`` sets: ``pg_catalog`` and the Kestrel schema only, whose functions
``kestrel_reader`` may not execute. Qualified ones are checked here: functions, operators
(``OPERATOR(s.op)``) and types (``::s.t``, a domain's CHECK runs code) outside ``pg_catalog``
are refused.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from collections import Counter

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from kestrel_core import KestrelError

from . import qualified
from .allowlist import attribute_refusal, call_refusal, catalog_names, keywords
from .names import IDENT as _IDENT
from .names import IDENT_START as _IDENT_START
from .names import TOKEN as _TOKEN
from .names import folded as _folded
from .names import is_name as _is_name
from .names import unquoted as _unquoted

__all__ = ["QueryRefused", "check_read_only"]


class QueryRefused(KestrelError):
    """The query is not a single read the console may run; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"refused: {reason}")


# Statement classes whose keyword is not the statement's first word (WITH x AS (...) DELETE).
_WRITE_KEYWORDS: dict[type[exp.Expression], str] = {
    exp.Insert: "INSERT",
    exp.Update: "UPDATE",
    exp.Delete: "DELETE",
    exp.Merge: "MERGE",
}
_READ_STATEMENTS = (exp.Select, exp.SetOperation, exp.Values)

# Dollar-quote tags are identifiers without $ (names.py: Postgres' identifiers).
_DOLLAR_QUOTE = re.compile(f"\\$(?:[{_IDENT_START}][{_IDENT_START}0-9]*)?\\$")
_DOLLAR_PARAM = re.compile(r"\$[0-9]+")

_PLACEHOLDER = re.compile(r"%(?:\((?P<name>[^)]*)\))?(?P<format>[sbt%])")
_ADHOC_PLACEHOLDER = re.compile(r"%\((?P<name>[A-Za-z_]\w*)\)s")
_EXPLAIN = re.compile(
    r"\s*explain\b(?:\s*\([^()]*\)|\s+analy[sz]e\b(?:\s+verbose\b)?|\s+verbose\b)?",
    re.IGNORECASE,
)
_SIMPLE_SHOW = re.compile(r"\s*show(?:\s+[A-Za-z_][\w.]*){1,3}\s*;?\s*\Z", re.IGNORECASE)
_FIRST_WORD = re.compile(r"[A-Za-z_]\w*")


def check_read_only(query: str, *, placeholders: bool = False) -> None:
    """Raise QueryRefused unless ``query`` is exactly one read (SELECT, WITH ... SELECT, VALUES,
    TABLE, UNION/INTERSECT/EXCEPT, EXPLAIN of one of those, simple SHOW).

    ``placeholders=True`` accepts psycopg placeholders (``%(since)s``), for saved reports run
    with bound parameters; the text is then checked as Postgres will receive it (placeholders
    become ``$n``, ``%%`` becomes ``%``).
    """
    text = _as_sent(query) if placeholders else query
    skeleton = _skeleton(text)
    if not placeholders:
        _check_no_placeholders(skeleton)
    _check_single_statement(skeleton)
    if _SIMPLE_SHOW.match(skeleton):
        return
    skeleton, explained = _without_explain(skeleton)
    statement = _parse(skeleton)
    _check_statement_kind(statement, skeleton, explained=explained)
    _check_modifying_ctes(statement)
    _check_select_into(statement)
    _check_locking(statement)
    _check_functions(statement)
    _refuse(qualified.refusal_in_tree(statement))
    _check_names_in_text(skeleton, statement)


# --- preparing the text ---------------------------------------------------------------------


def _as_sent(query: str) -> str:
    """The text Postgres receives once psycopg has bound parameters into ``query``."""

    def replace(match: re.Match[str]) -> str:
        return "%" if match["format"] == "%" else "$1"

    return _PLACEHOLDER.sub(replace, query)


def _skeleton(text: str) -> str:
    """``text`` with every comment and string literal blanked, lexed as Postgres lexes it.

    Comments become spaces, string literals of every kind become ``'   '`` of the same
    length (newlines kept), so positions in sqlglot's error messages still match ``text``.
    Quoted identifiers stay. Unicode-escaped identifiers (``U&"..."``) are refused: their
    escapes could spell a refused function's name.
    """
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if text.startswith("--", i):
            end = _line_end(text, i)
            out.append(_blank(text[i:end]))
            i = end
        elif text.startswith("/*", i):
            end = _block_comment_end(text, i)
            out.append(_blank(text[i:end]))
            i = end
        elif ch == "'":
            end = _quoted_end(text, i)
            out.append(_blank_string(text[i:end]))
            i = end
        elif ch == '"':
            end = _quoted_end(text, i)
            out.append(text[i:end])
            i = end
        elif ch == "$":
            tag = _DOLLAR_QUOTE.match(text, i)
            param = _DOLLAR_PARAM.match(text, i)
            if param:
                end = param.end()
                out.append(text[i:end])
            elif tag:
                close = text.find(tag.group(), tag.end())
                if close < 0:
                    raise QueryRefused("cannot parse: unterminated dollar-quoted string")
                end = close + len(tag.group())
                out.append(_blank_string(text[i:end]))
            else:
                end = i + 1
                out.append(ch)
            i = end
        elif (word := _IDENT.match(text, i)) is not None:
            end = word.end()
            prefix = word.group()
            if prefix in ("e", "E") and text.startswith("'", end):
                close = _quoted_end(text, end, backslash=True)
                out.append(" " + _blank_string(text[end:close]))
                end = close
            elif prefix in ("u", "U") and text.startswith("&'", end):
                close = _quoted_end(text, end + 1)
                out.append("  " + _blank_string(text[end + 1:close]))
                end = close
            elif prefix in ("u", "U") and text.startswith('&"', end):
                raise QueryRefused('Unicode-escaped identifier (U&"..."): write the name plainly')
            else:
                out.append(prefix)
            i = end
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _without_explain(skeleton: str) -> tuple[str, bool]:
    """Blank ``EXPLAIN [options]`` off the front: the statement explained is what counts."""
    match = _EXPLAIN.match(skeleton)
    if match is None:
        return skeleton, False
    rest = skeleton[match.end():]
    if not rest.strip(" \t\r\n;"):
        raise QueryRefused("EXPLAIN of nothing: give it a query")
    return " " * match.end() + rest, True


def _blank(chunk: str) -> str:
    return "".join(c if c in "\n\r" else " " for c in chunk)


def _blank_string(literal: str) -> str:
    # Keep a "0" so typed literals still parse (interval '0', date '0'); the rest is blanked.
    inner = _blank(literal[1:-1])
    return "'" + ("0" + inner[1:] if inner else "") + "'"


def _line_end(text: str, start: int) -> int:
    ends = [p for p in (text.find("\n", start), text.find("\r", start)) if p >= 0]
    return min(ends) if ends else len(text)


def _block_comment_end(text: str, start: int) -> int:
    """End of the comment opened at ``start``; Postgres nests ``/* /* */ */``."""
    depth, i = 0, start
    while i < len(text):
        if text.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    raise QueryRefused("cannot parse: unterminated /* comment */")


def _quoted_end(text: str, start: int, *, backslash: bool = False) -> int:
    """End of the '...' literal or "..." identifier opened at ``start``: a doubled quote stays
    inside; with ``backslash`` (E'...') a backslash escapes the next character too."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        ch = text[i]
        if backslash and ch == "\\":
            i += 2
        elif ch == quote:
            if text.startswith(quote, i + 1):
                i += 2
            else:
                return i + 1
        else:
            i += 1
    what = "quoted string" if quote == "'" else "quoted identifier"
    raise QueryRefused(f"cannot parse: unterminated {what}")


@contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    """sqlglot logs a warning when it falls back to a generic Command; we refuse those anyway."""
    logger = logging.getLogger("sqlglot")
    mute = logging.Filter("\0")  # matches no logger name: drops every record
    logger.addFilter(mute)
    try:
        yield
    finally:
        logger.removeFilter(mute)


def _parse(skeleton: str) -> exp.Expression:
    try:
        with _quiet_sqlglot():
            statements = [s for s in sqlglot.parse(skeleton, read="postgres") if s is not None]
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        where = f" (line {first['line']}, column {first['col']})" if "line" in first else ""
        raise QueryRefused(f"cannot parse: {first.get('description', exc)}{where}") from None
    except TokenError as exc:
        raise QueryRefused(f"cannot parse: {exc}") from None
    except Exception as exc:  # absurd nesting, sqlglot bugs: fail closed
        raise QueryRefused(f"cannot parse: {type(exc).__name__}") from None
    if len(statements) != 1:  # the skeleton's count said one; stay safe if sqlglot disagrees
        raise QueryRefused(f"{len(statements)} statements: run one at a time")
    return statements[0]


# --- the checks, one rule each --------------------------------------------------------------


def _check_no_placeholders(skeleton: str) -> None:
    match = _ADHOC_PLACEHOLDER.search(skeleton)
    if match:
        raise QueryRefused(
            f"query parameter {match.group()}: ad-hoc SQL takes no parameters (saved reports do)"
        )


def _check_single_statement(skeleton: str) -> None:
    count, pending = 0, False
    for token in _TOKEN.findall(skeleton):  # a ';' in a quoted identifier is one token
        if token == ";":
            count, pending = count + pending, False
        else:
            pending = True
    count += pending
    if count == 0:
        raise QueryRefused("empty query")
    if count > 1:
        raise QueryRefused(f"{count} statements: run one at a time")


def _check_statement_kind(statement: exp.Expression, skeleton: str, *, explained: bool) -> None:
    inner = statement
    while isinstance(inner, (exp.Subquery, exp.Paren)):
        inner = inner.this
    if isinstance(inner, _READ_STATEMENTS):
        return
    keyword = _WRITE_KEYWORDS.get(type(inner)) or _first_word(skeleton)
    if not explained:
        raise QueryRefused(f"not a read: {keyword}")
    if keyword in _WRITE_KEYWORDS.values() or keyword == "CREATE":
        raise QueryRefused(f"EXPLAIN of a write: {keyword}")
    raise QueryRefused(f"EXPLAIN of a non-read: {keyword}")


def _first_word(skeleton: str) -> str:
    match = _FIRST_WORD.search(skeleton)
    return match.group().upper() if match else skeleton.strip()[:20]


def _check_modifying_ctes(statement: exp.Expression) -> None:
    write = statement.find(*_WRITE_KEYWORDS)
    if write is not None:
        raise QueryRefused(f"data-modifying CTE: {_WRITE_KEYWORDS[type(write)]}")


def _check_select_into(statement: exp.Expression) -> None:
    if statement.find(exp.Into) is not None:
        raise QueryRefused("SELECT ... INTO creates a table")


def _check_locking(statement: exp.Expression) -> None:
    lock = statement.find(exp.Lock)
    if lock is None:
        return
    update, key = bool(lock.args.get("update")), bool(lock.args.get("key"))
    clause = {
        (True, False): "FOR UPDATE",
        (True, True): "FOR NO KEY UPDATE",
        (False, True): "FOR KEY SHARE",
        (False, False): "FOR SHARE",
    }[(update, key)]
    raise QueryRefused(f"locking clause {clause}: row locks need a writable transaction")


def _check_functions(statement: exp.Expression) -> None:
    """Every call and attribute reference in sqlglot's tree, against the allowlist."""
    for node in statement.walk():
        if isinstance(node, exp.Anonymous):
            _refuse(call_refusal(node.name.lower()))
        elif isinstance(node, exp.Column) and node.args.get("table") is not None:
            _refuse(attribute_refusal(_folded(node.this)))
        elif isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
            _refuse(attribute_refusal(_folded(node.expression)))


def _refuse(reason: str | None) -> None:
    if reason is not None:
        raise QueryRefused(reason)


def _check_names_in_text(skeleton: str, statement: exp.Expression) -> None:
    """Backstop independent of how sqlglot names things: in the code Postgres will see, a name
    followed by ``(`` is a call (``schema.name(`` a qualified one) and ``.name`` not followed
    by ``(`` may be an attribute call. Check each as written (quoted names keep their case).

    Not calls: an unquoted keyword that names no function (``FILTER (``, ``IN (``), and as
    many ``alias(`` as the tree has aliases with column lists (``generate_series(1, 3) g(i)``,
    ``WITH n(i) AS``). ``schema.relation`` in FROM is not an attribute.
    """
    tokens = _TOKEN.findall(skeleton)
    aliases, relations = _non_call_names(statement)
    for i, token in enumerate(tokens):
        if not _is_name(token):
            continue
        name, quoted = _unquoted(token)
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        before = tokens[i - 1] if i else ""
        _refuse(qualified.refusal_in_text(tokens, i))
        if after == "(":
            qualifier = tokens[i - 2] if before == "." and i >= 2 and _is_name(tokens[i - 2]) else None
            if qualifier is None and not quoted and name in keywords():
                reason = call_refusal(name) if name in _catalog_keywords() else None
            else:
                reason = call_refusal(name, _unquoted(qualifier)[0] if qualifier else None)
            if reason is not None and qualifier is None and aliases[name] > 0:
                aliases[name] -= 1
                continue
            _refuse(reason)
        elif before == "." and after != ".":
            reason = attribute_refusal(name)
            if reason is not None and relations[name] > 0:
                relations[name] -= 1
                continue
            _refuse(reason)


@cache
def _catalog_keywords() -> frozenset[str]:
    """Keywords that also name catalog functions (``left(``, ``extract(``): checked as calls."""
    return keywords() & catalog_names()


def _non_call_names(statement: exp.Expression) -> tuple[Counter[str], Counter[str]]:
    """Names the tree shows are not calls though followed by ``(`` (aliases with column lists,
    TABLESAMPLE methods) or not attributes though after a dot (schema-qualified relations)."""
    aliases: Counter[str] = Counter()
    relations: Counter[str] = Counter()
    for node in statement.walk():
        if isinstance(node, exp.TableAlias) and node.args.get("columns") and node.this:
            aliases[_folded(node.this)] += 1
        elif isinstance(node, exp.TableSample) and node.args.get("method") is not None:
            aliases[node.args["method"].name.lower()] += 1
        elif isinstance(node, exp.Table) and node.args.get("db") is not None:
            relations[_folded(node.this)] += 1
    return aliases, relations
