"""The SQL editor's helpers, on sqlglot: formatting a query (dialect postgres) and completing
the table or column name under the cursor from the live schema's names. Only the editor's
text is touched: what runs is still checked by the guard, on PostgreSQL's own parser (pglast,
``kestrel_console.adhoc``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import psycopg

from kestrel_core.db import statements_beside

SQL = statements_beside(__file__)

DIALECT = "postgres"
_WORD_BEFORE = re.compile(r"(?:(?P<qualifier>[A-Za-z_][A-Za-z0-9_]*)\.)?(?P<word>[A-Za-z_][A-Za-z0-9_]*)?$")
_TABLE_WORDS = re.compile(
    r"\b(?:from|join)\s+(?:[A-Za-z_][A-Za-z0-9_]*\.)?([A-Za-z_][A-Za-z0-9_]*)(?:\s+(?:as\s+)?([A-Za-z_][A-Za-z0-9_]*))?",
    re.I,
)
MAX_SHOWN = 8


class FormatError(ValueError):
    """The text is not SQL sqlglot can parse (the first line of why)."""


def format_sql(text: str) -> str:
    """``text`` laid out by sqlglot (keywords upper case, one clause a line), statements
    separated by ``;`` and a blank line. FormatError when it cannot be parsed."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    if not text.strip():
        return text
    try:
        statements = sqlglot.transpile(text, read=DIALECT, write=DIALECT, pretty=True)
    except SqlglotError as exc:
        raise FormatError(str(exc).splitlines()[0]) from None
    statements = [s for s in statements if s.strip()]
    return ";\n\n".join(statements) + (";\n" if text.rstrip().endswith(";") else "\n")


@dataclass(frozen=True)
class SchemaNames:
    """Tables (and views) with their columns, as read from the live schema."""

    columns: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, conn: psycopg.Connection, schema: str) -> SchemaNames:
        found: dict[str, list[str]] = {}
        for table, column in conn.execute(SQL.schema_names, {"schema": schema}).fetchall():
            found.setdefault(table, []).append(column)
        return cls(found)


@dataclass(frozen=True)
class Completion:
    """What to insert at the cursor (``insert``, maybe empty) and the names that fit."""

    insert: str
    candidates: list[str]
    word: str


def tables_in(text: str) -> dict[str, str]:
    """Aliases and names of the tables the query reads, each to its table (sqlglot's parse;
    a query being typed that does not parse yet: its FROM and JOIN words)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    found: dict[str, str] = {}
    try:
        for statement in sqlglot.parse(text, read=DIALECT):
            if statement is None:
                continue
            for table in statement.find_all(exp.Table):
                found[table.name] = table.name
                if table.alias:
                    found[table.alias] = table.name
        return found
    except SqlglotError:
        pass
    for name, alias in _TABLE_WORDS.findall(text):
        found[name] = name
        if alias and alias.lower() not in {"where", "join", "on", "group", "order", "limit", "left", "inner"}:
            found[alias] = name
    return found


def complete(text: str, names: SchemaNames, whole: str | None = None) -> Completion:
    """Complete the word that ends ``text`` (the editor's text up to the cursor; ``whole``:
    all of it, where the query's tables are looked for): after
    ``t.``, a column of table (or alias) ``t``; else a table name, then the columns of the
    tables the query reads, then every other column. One candidate: the rest of it; several:
    their longest common prefix."""
    match = _WORD_BEFORE.search(text)
    qualifier = match["qualifier"] if match else None
    word = (match["word"] if match else None) or ""
    tables = tables_in(text if whole is None else whole)
    if qualifier is not None:
        table = tables.get(qualifier, qualifier)
        pool = list(names.columns.get(table, []))
    else:
        read = [c for t in tables.values() for c in names.columns.get(t, [])]
        others = [c for cols in names.columns.values() for c in cols]
        pool = list(names.columns) + read + others
    seen: set[str] = set()
    candidates = []
    for name in pool:
        if name.lower().startswith(word.lower()) and name not in seen:
            seen.add(name)
            candidates.append(name)
    if not candidates:
        return Completion("", [], word)
    common = candidates[0]
    for name in candidates[1:]:
        while not name.lower().startswith(common.lower()):
            common = common[:-1]
    return Completion(common[len(word) :], candidates, word)
