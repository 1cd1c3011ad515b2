"""The guard's names resolved against the live catalog, in the session the query runs in.

The guard's allowlists (``allowlist``) are lists of pg_catalog names, shipped with the package:
they say what a name means in a catalog of PostgreSQL 15 with nothing added. The server the
query runs on may hold more: an admin's helper in the Kestrel schema (which everyone may
EXECUTE unless its owner revoked it), an operator or a type of the same name as a built-in one,
a view whose rules call a function as the view's owner, a row security policy, a newer
server's catalog functions. Postgres resolves an unqualified name against every schema of the
search path (``pg_catalog``, the Kestrel schema, ``pg_temp``), picking among overloads by
argument types, and reads ``(x).f`` as ``f(x)`` when ``f`` is not a column.

So for every name the query holds, this asks the catalog (``resolve.sql``, one round trip, as
the read-only role, after the search path is set) for every object of that name the session
could resolve it to, whatever the argument types, and refuses the query unless each is one
the allowlist allows: a function or an operator's function in ``pg_catalog`` on the allowlist,
a type of ``pg_catalog``, a relation of ``pg_catalog``, ``information_schema`` or the Kestrel
schema. A view of the Kestrel schema runs its query as its owner, and a row security policy
its expression: their definitions, as the server deparses them for this search path, are
checked as queries in turn (the guard, then these names), views over views to
``MAX_VIEW_DEPTH``. (The catalog records no dependency on a built-in function, so pg_depend
cannot say what a view calls.) Every overload
counts, not only the one the server would pick: that is the server's choice, made later.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg
from pglast import ast
from pglast.enums import A_Expr_Kind
from psycopg import sql

from kestrel_core.db import statements_beside

from .allowlist import FILE_VIEWS, allowed_names
from .guard import QueryRefused, walk

SQL = statements_beside(__file__)

__all__ = ["Names", "check_names", "names_of"]

# Operators a query uses without naming them: comparisons behind IN, BETWEEN, CASE x WHEN,
# NULLIF, IS DISTINCT FROM, ORDER BY, DISTINCT, GROUP BY, UNION, min()/max(), joins by USING.
IMPLICIT_OPERATORS = frozenset({"=", "<>", "<", ">", "<=", ">="})
# Schemas whose relations an ad-hoc query may read, besides the Kestrel schema.
SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema"})


@dataclass
class Names:
    """Every name of one query the server resolves through the catalog."""

    functions: set[str] = field(default_factory=set)  # called, or attribute notation's f
    operators: set[str] = field(default_factory=lambda: set(IMPLICIT_OPERATORS))
    types: set[str] = field(default_factory=set)
    relations: set[tuple[str | None, str]] = field(default_factory=set)


def _strings(items: Any) -> list[str]:
    return [item.sval for item in items or () if isinstance(item, ast.String)]


def names_of(tree: ast.Node) -> Names:
    """The names in a parse tree the guard accepted."""
    names = Names()
    for node in walk(tree):
        if isinstance(node, ast.FuncCall):
            names.functions.add(_strings(node.funcname)[-1])
        elif isinstance(node, ast.ColumnRef):
            names.functions.update(_strings((node.fields or ())[1:]))
        elif isinstance(node, ast.A_Indirection):
            names.functions.update(_strings(node.indirection))
        elif isinstance(node, ast.A_Expr):
            if node.kind not in (A_Expr_Kind.AEXPR_BETWEEN, A_Expr_Kind.AEXPR_NOT_BETWEEN) and node.kind not in (
                A_Expr_Kind.AEXPR_BETWEEN_SYM,
                A_Expr_Kind.AEXPR_NOT_BETWEEN_SYM,
            ):
                names.operators.update(_strings(node.name)[-1:])
        elif isinstance(node, ast.SubLink):
            names.operators.update(_strings(node.operName)[-1:])
        elif isinstance(node, ast.SortBy):
            names.operators.update(_strings(node.useOp)[-1:])
        elif isinstance(node, ast.TypeName):
            names.types.update(_strings(node.names)[-1:])
        elif isinstance(node, ast.RangeVar):
            names.relations.add((node.schemaname, node.relname))
    return names


# How deep views over views are followed before the query is refused.
MAX_VIEW_DEPTH = 8


def check_names(conn: psycopg.Connection, names: Names, schema: str, _depth: int = 0) -> None:
    """Refuse (QueryRefused) unless every object the names may resolve to is allowed; views and
    row security policies of the Kestrel schema are checked as queries, in turn."""
    relations = sorted(names.relations, key=lambda r: (r[0] or "", r[1]))
    rows = conn.execute(
        SQL.resolve_names,
        {
            "functions": sorted(names.functions),
            "operators": sorted(names.operators),
            "types": sorted(names.types),
            "relation_schemas": [s for s, _ in relations],
            "relation_names": [n for _, n in relations],
        },
    ).fetchall()
    builtin_types = {name for kind, nsp, name, *_, builtin in rows if kind == "type" and builtin}
    for kind, nsp, name, what, other_schema, other_name, builtin in rows:
        reason = _not_built_in(kind, nsp, name, what, other_schema, other_name, builtin) or _refusal(
            kind, nsp, name, what, other_schema, other_name, schema
        )
        if reason is not None:
            raise QueryRefused(reason)
    for type_name in sorted(names.types - builtin_types):
        raise QueryRefused(
            f"type {type_name}: not a built-in type of this server (a domain's CHECK or a type's "
            "functions would run unchecked)"
        )
    for kind, nsp, name, what, definition, _, _ in rows:
        if kind in ("relation", "policy") and definition is not None:
            text = definition if kind == "relation" else _policy_query(definition)
            _check_definition(conn, f"{nsp}.{name}", kind, what, text, schema, _depth)


def _policy_query(expression: str) -> str:
    """A policy's USING expression as a query the guard checks (text from the catalog, never run)."""
    return sql.SQL(SQL.policy_query.strip()).format(expression=sql.SQL(expression)).as_string(None)


def _check_definition(
    conn: psycopg.Connection, relation: str, kind: str, what: str, text: str, schema: str, depth: int
) -> None:
    """A view's query or a policy's expression: what reading the relation runs."""
    from .guard import check_read_only

    source = f"view {relation}" if kind == "relation" else f"row security policy {what} of {relation}"
    if depth >= MAX_VIEW_DEPTH:
        raise QueryRefused(f"{source}: views over views deeper than {MAX_VIEW_DEPTH} are not followed")
    try:
        tree = check_read_only(text)
        check_names(conn, names_of(tree), schema, depth + 1)
    except QueryRefused as exc:
        raise QueryRefused(f"{source} runs what a query may not: {exc.reason}") from None


def _not_built_in(
    kind: str, nsp: str, name: str, what: str, other_schema: str | None, other_name: str | None, builtin: bool
) -> str | None:
    """An object an admin added where the built-in ones live (pg_catalog, information_schema:
    a superuser may create there), or a cast of theirs: not what the allowlist names."""
    if kind == "cast":
        return (
            f"cast {what} runs the function {other_schema or nsp}.{name}, which is not built in "
            "(a conversion ::type, CAST or an implicit one would call it): ask an admin to drop the cast"
        )
    if builtin or kind in ("policy",) or nsp not in SYSTEM_SCHEMAS:
        return None
    if kind == "relation" and what == "v":
        return None  # its definition is checked as a query (resolve.sql gives it)
    noun = {"function": "function", "operator": "operator", "type": "type", "relation": "relation"}[kind]
    return f"{noun} {nsp}.{what if kind != 'relation' else name}: added to {nsp} after initdb, not built in"


def _refusal(
    kind: str, nsp: str, name: str, what: str, other_schema: str | None, other_name: str | None, schema: str
) -> str | None:
    if kind == "function":
        if nsp == "pg_catalog":
            if name in allowed_names():
                return None
            return (
                f"function {what}: a catalog function not on the allowlist of side-effect-free functions "
                f"(a call {name}(...) or the attribute notation x.{name} reaches it)"
            )
        return (
            f"function {nsp}.{what}: the query may resolve the name {name} to it (a call {name}(...) or "
            f"the attribute notation x.{name}): only allowlisted pg_catalog functions run here"
        )
    if kind == "operator":
        if nsp == "pg_catalog" and other_schema == "pg_catalog" and other_name in allowed_names():
            return None
        if nsp == "pg_catalog" and other_name not in allowed_names():
            return f"operator {what}: its function {other_name} is not on the allowlist"
        return (
            f"operator {nsp}.{what} (function {other_schema}.{other_name}): the query may resolve the "
            f"operator {name} to it: only pg_catalog operators run here"
        )
    if kind == "type":
        if nsp == "pg_catalog":
            return None
        return f"type {nsp}.{what}: the query may resolve the type {name} to it: only pg_catalog types are used here"
    if kind == "relation":
        if nsp in SYSTEM_SCHEMAS:
            return f"relation {name}: reads the server's files or directories" if name in FILE_VIEWS else None
        if nsp != schema:
            return f"relation {nsp}.{name}: only the Kestrel schema ({schema}) and the system catalogs may be read"
        if what == "f":
            return f"relation {nsp}.{name}: a foreign table (its wrapper runs code): not read here"
    return None
