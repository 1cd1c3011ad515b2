"""Layer 1 of the read-only guard: refuse, before anything reaches Postgres, SQL that is not
exactly one read, or that names anything not known to be free of side effects.

Operators type ad-hoc SQL and run report files other people wrote; both go through here first,
then through ``session.run_read_only`` (layer 2: a READ ONLY transaction that is always rolled
back; layer 3: run as the read-only role ``kestrel_reader``). Layer 2 stops every write to
tables; this layer also stops what a read-only transaction allows but an operator console must
not do: signalling other sessions, reading the server's files, advisory locks, changing
settings, running SQL given as text, and so on.

The text is read by Postgres's own grammar: libpg_query (through ``pglast``) is the parser of
PostgreSQL 15 compiled as a library, so what is a string, a comment, an identifier or code is
decided by the same lexer and grammar the server runs (string continuation across newlines,
``E''`` escapes, nested comments, dollar quotes, ``U&`` escapes). No code of ours lexes SQL.

The parse tree is then checked against allowlists, node by node: every node kind must be one a
read query is made of (``_NODES``), and

- statements: one ``SELECT`` (``WITH``, ``VALUES``, ``TABLE``, set operations), ``EXPLAIN`` of
  one, or ``SHOW``; no ``SELECT ... INTO``, no locking clause, no data-modifying CTE;
- functions (``FuncCall``, in any position, including what the grammar makes of ``EXTRACT``,
  ``AT TIME ZONE``, ``TRIM``...): unqualified or in ``pg_catalog``, and on the allowlist
  (``allowlist``: IMMUTABLE or STABLE, minus a reviewed list; regenerate with
  ``allowlist_build.py``);
- attribute notation (``t.f``, ``(x).f``: Postgres reads ``f(t)`` when ``f`` is not a column):
  no catalog function off the allowlist;
- operators (``OPERATOR(s.op)``, ``ANY``/``ALL``, ``ORDER BY ... USING``): ``pg_catalog``
  operators whose functions are all allowed;
- types (casts, typed literals, column definition lists, ``XMLTABLE`` columns): ``pg_catalog``
  types only (a domain's CHECK or a type's input function is code the query does not name);
- relations: not in another database, not the catalog views that read the server's files;
  TABLESAMPLE methods: the two built-in ones.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pglast
from pglast import ast
from pglast.enums import A_Expr_Kind, LockClauseStrength, SetOperation
from pglast.parser import ParseError

from kestrel_core import KestrelError

from .allowlist import (
    attribute_refusal,
    call_refusal,
    operator_refusal,
    relation_refusal,
    type_refusal,
)
from .sizes import MAX_BUILT, SizeRefused, check_sizes

__all__ = ["MAX_BUILT", "MAX_QUERY_BYTES", "QueryRefused", "check_read_only", "check_text", "walk"]

# The longest text the guard parses, in UTF-8 bytes (what the server receives: the session's
# client encoding is pinned to UTF8 by ``read_only``). A console query or a report is far
# shorter; past this the parser's recursion, not the query, is what an attacker exercises:
# libpg_query and pglast recurse once per level of an expression, and `SELECT 1` followed by
# 40,000 ` + 1` (160 KB) overflowed the C stack (the process died, exit 139). At this bound the
# deepest expression the text can hold (16,000 levels) parses in about 2 s (pglast building
# its Python tree), on a parser thread of its own with ``PARSER_STACK`` bytes of stack, eight
# times what it needs.
MAX_QUERY_BYTES = 64 * 1024
PARSER_STACK = 64 * 1024 * 1024
_STACK_LOCK = threading.Lock()


class QueryRefused(KestrelError):
    """The query is not a single read the console may run; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"refused: {reason}")


# psycopg's placeholders as it converts them before sending (it does not lex SQL either: a
# placeholder inside a string literal is converted too), so the guard parses what is sent.
_PLACEHOLDER = re.compile(r"%(?:\((?P<name>[^)]*)\))?(?P<format>[sbt%])")
_ADHOC_PLACEHOLDER = re.compile(r"%\((?P<name>[A-Za-z_]\w*)\)s")

# Every node kind a read query's raw parse tree is made of. Anything else is refused by name.
_NODES = frozenset(
    {
        "RawStmt",
        "SelectStmt",
        "ExplainStmt",
        "VariableShowStmt",
        "DefElem",
        "ResTarget",
        "ColumnRef",
        "A_Star",
        "A_Const",
        "String",
        "Integer",
        "Float",
        "Boolean",
        "BitString",
        "ParamRef",
        "FuncCall",
        "NamedArgExpr",
        "A_Expr",
        "BoolExpr",
        "NullTest",
        "BooleanTest",
        "TypeCast",
        "TypeName",
        "CollateClause",
        "SubLink",
        "CaseExpr",
        "CaseWhen",
        "CoalesceExpr",
        "MinMaxExpr",
        "RowExpr",
        "A_ArrayExpr",
        "A_Indirection",
        "A_Indices",
        "SQLValueFunction",
        "GroupingFunc",
        "GroupingSet",
        "SortBy",
        "WindowDef",
        "RangeVar",
        "RangeSubselect",
        "RangeFunction",
        "RangeTableSample",
        "RangeTableFunc",
        "RangeTableFuncCol",
        "JoinExpr",
        "Alias",
        "ColumnDef",
        "WithClause",
        "CommonTableExpr",
        "CTESearchClause",
        "CTECycleClause",
        "XmlExpr",
        "XmlSerialize",
        "List",
        # The grammar's own nodes in a SELECT: IntoClause and LockingClause, refused with a reason.
        "IntoClause",
        "LockingClause",
    }
)
_WRITES = {
    "InsertStmt": "INSERT",
    "UpdateStmt": "UPDATE",
    "DeleteStmt": "DELETE",
    "MergeStmt": "MERGE",
    "CreateTableAsStmt": "CREATE",
}
_LOCKS = {
    LockClauseStrength.LCS_FORUPDATE: "FOR UPDATE",
    LockClauseStrength.LCS_FORNOKEYUPDATE: "FOR NO KEY UPDATE",
    LockClauseStrength.LCS_FORSHARE: "FOR SHARE",
    LockClauseStrength.LCS_FORKEYSHARE: "FOR KEY SHARE",
}
# A_Expr kinds whose name is grammar (BETWEEN), not an operator: their operators are <= and >=.
_NOT_OPERATORS = {
    A_Expr_Kind.AEXPR_BETWEEN,
    A_Expr_Kind.AEXPR_NOT_BETWEEN,
    A_Expr_Kind.AEXPR_BETWEEN_SYM,
    A_Expr_Kind.AEXPR_NOT_BETWEEN_SYM,
}
_TABLESAMPLE_METHODS = frozenset({"system", "bernoulli"})


def check_read_only(query: str, *, placeholders: bool = False) -> ast.Node:
    """Raise QueryRefused unless ``query`` is exactly one read (SELECT, WITH ... SELECT, VALUES,
    TABLE, UNION/INTERSECT/EXCEPT, EXPLAIN of one of those, SHOW); return its parse tree.

    ``placeholders=True`` accepts psycopg placeholders (``%(since)s``), for saved reports run
    with bound parameters; the text is then checked as Postgres will receive it (placeholders
    become ``$1``, ``%%`` becomes ``%``).
    """
    check_text(query)
    text = as_sent(query) if placeholders else query
    statements = _parse(text, placeholders=placeholders)
    if not statements:
        raise QueryRefused("empty query")
    if len(statements) > 1:
        raise QueryRefused(f"{len(statements)} statements: run one at a time")
    statement = statements[0].stmt
    _check_statement_kind(statement, text, statements[0].stmt_location)
    nodes = list(walk(statement))
    for node in nodes:
        _check_node(node, placeholders=placeholders)
    try:
        check_sizes(nodes)
    except SizeRefused as exc:
        raise QueryRefused(exc.reason) from None
    return statement


def check_text(query: str) -> bytes:
    """Refuse, in time linear in its length and before any parsing, a text the guard cannot
    read as the server will: longer than ``MAX_QUERY_BYTES``, holding a character UTF-8
    cannot carry (a lone surrogate, as a command line of invalid bytes gives), or a NUL
    (libpq and the parser both stop there). Return the UTF-8 bytes the server will receive."""
    if len(query) > MAX_QUERY_BYTES:
        raise QueryRefused(_too_long(len(query), "characters"))
    try:
        sent = query.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise QueryRefused(
            f"character {exc.start + 1} ({query[exc.start]!r}) is not valid text: it cannot be sent as UTF-8"
        ) from None
    if len(sent) > MAX_QUERY_BYTES:
        raise QueryRefused(_too_long(len(sent), "bytes"))
    nul = sent.find(b"\0")
    if nul >= 0:
        raise QueryRefused(f"character {len(sent[:nul].decode('utf-8')) + 1} is a NUL: a query cannot hold one")
    return sent


def _too_long(size: int, unit: str) -> str:
    return (
        f"query of {size:,} {unit}: at most {MAX_QUERY_BYTES:,} bytes are checked and run here "
        "(a console query is far shorter: split it, or narrow it)"
    )


def walk(tree: Any) -> Iterator[ast.Node]:
    """Every node of a pglast tree, parents before children, in the order of the text."""
    stack: list[Any] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
        elif isinstance(item, ast.Node):
            yield item
            stack.extend(reversed([getattr(item, slot) for slot in item.__slots__]))


# --- reading the text ------------------------------------------------------------------------


def as_sent(query: str) -> str:
    """The text Postgres receives once psycopg has bound parameters into ``query``."""

    def replace(match: re.Match[str]) -> str:
        return "%" if match["format"] == "%" else "$1"

    return _PLACEHOLDER.sub(replace, query)


def _parse_on_a_deep_stack(text: str) -> tuple[ast.RawStmt, ...]:
    """``pglast.parse_sql`` on a thread with ``PARSER_STACK`` bytes of stack, whatever thread
    asks (the TUI's workers, the CLI's main thread): its depth is bounded by the text's length,
    not by the caller's stack."""
    outcome: list[Any] = []

    def parse() -> None:
        try:
            outcome.append(pglast.parse_sql(text))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    with _STACK_LOCK:  # stack_size() is process-wide: set it only around this thread's start
        previous = threading.stack_size(PARSER_STACK)
        try:
            thread = threading.Thread(target=parse, name="kestrel-sql-parser", daemon=True)
            thread.start()
        finally:
            threading.stack_size(previous)
    thread.join()
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    result: tuple[ast.RawStmt, ...] = outcome[0]
    return result


def _parse(text: str, *, placeholders: bool) -> tuple[ast.RawStmt, ...]:
    try:
        return _parse_on_a_deep_stack(text)
    except ParseError as exc:
        if not placeholders:
            _refuse_adhoc_placeholder(text)
        if _only_explain(text):
            raise QueryRefused("EXPLAIN of nothing: give it a query") from None
        message, *where = exc.args or (str(exc),)
        at = f" (at character {where[0] + 1})" if where and isinstance(where[0], int) else ""
        raise QueryRefused(f"cannot parse: {message}{at}") from None
    except Exception as exc:  # absurd nesting and the like: fail closed
        raise QueryRefused(f"cannot parse: {type(exc).__name__}: {exc}") from None


def _tokens(text: str) -> list[tuple[str, str]]:
    """(token kind, text) by Postgres's own lexer; empty if it cannot lex the text."""
    try:
        return [(t.name, text[t.start : t.end + 1]) for t in pglast.parser.scan(text)]
    except ParseError:
        return []


def _refuse_adhoc_placeholder(text: str) -> None:
    """``%(name)s`` outside strings and comments (as the lexer sees them) in ad-hoc SQL."""
    if "%(" not in text:
        return
    tokens = _tokens(text)
    for i in range(len(tokens) - 4):
        spelled = "".join(token for _, token in tokens[i : i + 5])
        if tokens[i][1] == "%" and _ADHOC_PLACEHOLDER.fullmatch(spelled):
            raise QueryRefused(f"query parameter {spelled}: ad-hoc SQL takes no parameters (saved reports do)")


def _only_explain(text: str) -> bool:
    if len(text) > 100:  # EXPLAIN alone, with whitespace, comments and semicolons around it
        return False
    words = [token.upper() for _, token in _tokens(text) if token != ";"]
    return words == ["EXPLAIN"]


# --- the checks --------------------------------------------------------------------------------


def _check_statement_kind(statement: ast.Node, text: str, location: int) -> None:
    kind = type(statement).__name__
    if kind in ("SelectStmt", "VariableShowStmt"):
        return
    if kind == "ExplainStmt":
        inner = type(statement.query).__name__
        if inner == "SelectStmt":
            return
        if inner in _WRITES:
            raise QueryRefused(f"EXPLAIN of a write: {_WRITES[inner]}")
        raise QueryRefused(f"EXPLAIN of a non-read: {inner.removesuffix('Stmt').upper()}")
    keyword = _WRITES.get(kind) or _first_word(text[location:]) or kind
    raise QueryRefused(f"not a read: {keyword}")


def _first_word(text: str) -> str:
    tokens = _tokens(text)
    return tokens[0][1].upper() if tokens else ""


def _refuse(reason: str | None) -> None:
    if reason is not None:
        raise QueryRefused(reason)


def _names(items: Any) -> list[str]:
    """The names of a pglast name list (funcname, operator name, type names)."""
    return [item.sval for item in items or () if isinstance(item, ast.String)]


def _check_select(node: ast.SelectStmt) -> None:
    if node.intoClause is not None:
        raise QueryRefused("SELECT ... INTO creates a table")
    for lock in node.lockingClause or ():
        raise QueryRefused(
            f"locking clause {_LOCKS.get(lock.strength, 'FOR UPDATE')}: row locks need a writable transaction"
        )


def _check_cte(node: ast.CommonTableExpr) -> None:
    write = _WRITES.get(type(node.ctequery).__name__)
    if write is not None:
        raise QueryRefused(f"data-modifying CTE: {write}")


def _check_call(node: ast.FuncCall) -> None:
    names = _names(node.funcname)
    if len(names) > 2:
        raise QueryRefused(f"function {'.'.join(names)}: only pg_catalog functions on the allowlist may be called")
    _refuse(call_refusal(names[-1], names[0] if len(names) == 2 else None))


def _check_with(node: ast.WithClause) -> None:
    """A recursive CTE joined by UNION keeps every row it made in a hash table to drop
    duplicates: no setting bounds it (one took a backend to 1.7 GB). UNION ALL keeps its rows
    in a tuplestore, which spills to temporary files (temp_file_limit)."""
    if not node.recursive:
        return
    for cte in node.ctes or ():
        query = cte.ctequery
        if isinstance(query, ast.SelectStmt) and query.op == SetOperation.SETOP_UNION and not query.all:
            raise QueryRefused(
                f"recursive CTE {cte.ctename} joined by UNION: its duplicate check grows without bound on "
                "the server; write UNION ALL and stop it with a WHERE"
            )


def _check_operator_names(items: Any) -> None:
    if items:
        _refuse(operator_refusal(_names(items)))


def _check_expr(node: ast.A_Expr) -> None:
    if node.kind not in _NOT_OPERATORS:
        _check_operator_names(node.name)


def _check_attributes(fields: Any) -> None:
    for name in _names(fields):
        _refuse(attribute_refusal(name))


def _check_column(node: ast.ColumnRef) -> None:
    _check_attributes((node.fields or ())[1:])


def _check_type(node: ast.TypeName) -> None:
    names = _names(node.names)
    if node.setof or node.pct_type:
        raise QueryRefused(f"type {'.'.join(names)}: SETOF and %TYPE are not for queries")
    _refuse(type_refusal(names))


def _check_relation(node: ast.RangeVar) -> None:
    _refuse(relation_refusal(node.catalogname, node.schemaname, node.relname))


def _check_sample(node: ast.RangeTableSample) -> None:
    names = _names(node.method)
    if names[-1:] and names[-1] in _TABLESAMPLE_METHODS and names[:-1] in ([], ["pg_catalog"]):
        return
    raise QueryRefused(f"TABLESAMPLE {'.'.join(names)}: only SYSTEM and BERNOULLI may be used")


_CHECKS: dict[str, Callable[[Any], None]] = {
    "SelectStmt": _check_select,
    "CommonTableExpr": _check_cte,
    "WithClause": _check_with,
    "FuncCall": _check_call,
    "A_Expr": _check_expr,
    "SubLink": lambda node: _check_operator_names(node.operName),
    "SortBy": lambda node: _check_operator_names(node.useOp),
    "ColumnRef": _check_column,
    "A_Indirection": lambda node: _check_attributes(node.indirection),
    "TypeName": _check_type,
    "RangeVar": _check_relation,
    "RangeTableSample": _check_sample,
}


def _check_node(node: ast.Node, *, placeholders: bool) -> None:
    kind = type(node).__name__
    if kind not in _NODES:
        if kind in _WRITES:
            raise QueryRefused(f"data-modifying statement inside the query: {_WRITES[kind]}")
        raise QueryRefused(f"{kind} is not part of a read query: only SELECT, VALUES, EXPLAIN and SHOW may run here")
    if kind == "ParamRef" and not placeholders:
        raise QueryRefused(f"query parameter ${node.number}: ad-hoc SQL takes no parameters (saved reports do)")
    check = _CHECKS.get(kind)
    if check is not None:
        check(node)
