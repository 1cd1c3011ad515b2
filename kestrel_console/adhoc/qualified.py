"""Types and operators named with a schema: the guard refuses every schema but pg_catalog.

A domain's CHECK, a type's input function and an operator's function are code the query does
not name as a function, so the function allowlist never sees them. Unqualified, they resolve
through the search path ``run_read_only`` sets (``pg_catalog`` and the Kestrel schema, whose
functions the reader role may not execute); qualified, only this check stops one of another
schema (``public``, where everyone may execute a function unless its owner revoked it).
Checked twice, as the guard checks functions: in sqlglot's tree, and as written.
"""

from __future__ import annotations

from sqlglot import exp

from .names import folded, is_name, unquoted

__all__ = ["refusal_in_text", "refusal_in_tree"]


def refusal(kind: str, name: str) -> str:
    """Why the ``kind`` ("type" or "operator") ``name`` is refused."""
    runs = "its function" if kind == "operator" else "a domain's CHECK or the type's functions"
    return (f"{kind} {name}: only pg_catalog {kind}s may be named with a schema ({runs} would "
            "run unchecked); write it unqualified")


def refusal_in_tree(statement: exp.Expression) -> str | None:
    """The first type (``::s.t``, ``CAST(x AS s.t)``, column definition lists) or operator
    (``OPERATOR(s.op)``) of a schema other than pg_catalog in sqlglot's tree, refused."""
    for node in statement.walk():
        if isinstance(node, exp.DataType) and isinstance(node.args.get("kind"), exp.Dot):
            parts = [folded(part) for part in node.args["kind"].flatten() if isinstance(part, exp.Identifier)]
            if len(parts) >= 2 and parts[-2] != "pg_catalog":
                return refusal("type", ".".join(parts))
        elif isinstance(node, exp.Operator):
            schema, dot, _ = str(node.args.get("operator") or "").rpartition(".")
            if dot and unquoted(schema.strip())[0] != "pg_catalog":
                return refusal("operator", str(node.args["operator"]))
    return None


def refusal_in_text(tokens: list[str], i: int) -> str | None:
    """``OPERATOR(s.op)`` and ``::s.type`` as written at ``tokens[i]``, whatever sqlglot made
    of them: refused unless ``s`` is pg_catalog."""
    def schema_at(j: int) -> str | None:
        if j + 1 < len(tokens) and tokens[j + 1] == "." and is_name(tokens[j]):
            return unquoted(tokens[j])[0]
        return None

    if tokens[i].lower() == "operator" and tokens[i + 1:i + 2] == ["("]:
        schema = schema_at(i + 2)
        if schema is not None and schema != "pg_catalog":
            close = tokens.index(")", i + 4) if ")" in tokens[i + 4:] else len(tokens)
            return refusal("operator", f"{schema}.{''.join(tokens[i + 4:close])}")
    elif i >= 2 and tokens[i - 2:i] == [":", ":"]:
        schema = schema_at(i)
        if schema is not None and schema != "pg_catalog" and i + 2 < len(tokens):
            return refusal("type", f"{schema}.{unquoted(tokens[i + 2])[0]}")
    return None
