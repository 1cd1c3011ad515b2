"""What an ad-hoc query may name: the allowlists shipped with the package.

``allowed_functions.txt``, ``catalog_functions.txt``, ``allowed_operators.txt`` and
``catalog_types.txt`` are generated from the catalog of PostgreSQL 15 by ``allowlist_build.py``
(run by hand, output reviewed and committed; its docstring says how). Everything not on them is
refused with a reason naming it: volatile catalog functions, reviewed exclusions (SQL-text
runners, file readers, locks...), functions, operators and types of any other schema
(extensions, Kestrel's own, users').
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import resources

from .allowlist_build import excluded

__all__ = [
    "allowed_names",
    "allowed_operators",
    "attribute_refusal",
    "call_refusal",
    "catalog_names",
    "catalog_types",
    "operator_refusal",
    "relation_refusal",
    "type_refusal",
]

KESTREL_ACTIONS = frozenset({"decide_approval", "cancel_execution", "requeue_execution", "prune_finished"})
# Catalog views over the functions that read the server's files (excluded from the allowlist):
# reading one is calling them.
FILE_VIEWS = frozenset({"pg_file_settings", "pg_hba_file_rules", "pg_ident_file_mappings", "pg_config"})


@cache
def _load(filename: str) -> frozenset[str]:
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    # Header lines start with "# ": the operators "#", "#>", ... are names.
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("# "))


def allowed_names() -> frozenset[str]:
    """The function names an ad-hoc query may call (all in pg_catalog)."""
    return _load("allowed_functions.txt")


def catalog_names() -> frozenset[str]:
    """Every function name in pg_catalog."""
    return _load("catalog_functions.txt")


def _why(name: str) -> str:
    if name in KESTREL_ACTIONS:
        return "is a Kestrel operator action: use the approve/reject/cancel/requeue commands"
    reviewed = excluded(name)
    if reviewed is not None:
        return reviewed
    if name in catalog_names():
        return "not on the allowlist of side-effect-free functions (it is VOLATILE)"
    return "not a built-in function: only pg_catalog functions on the allowlist may be called"


def call_refusal(name: str, schema: str | None = None) -> str | None:
    """Why the call ``schema.name(...)`` is refused, or None if it is allowed.

    ``name`` and ``schema`` as Postgres resolves them (unquoted names folded to lower case).
    """
    if name in KESTREL_ACTIONS:
        return f"function {name}: {_why(name)}"
    if schema is not None and schema != "pg_catalog":
        return f"function {schema}.{name}: only pg_catalog functions on the allowlist may be called"
    if name in allowed_names():
        return None
    return f"function {name}: {_why(name)}"


def attribute_refusal(name: str) -> str | None:
    """Why ``x.name`` / ``(x).name`` is refused: Postgres reads it as ``name(x)`` when ``name``
    is not a column of ``x``. None for names that are not refused catalog functions (columns,
    fields). A function outside the catalog cannot be reached this way: ``run_read_only``'s
    search path holds only pg_catalog and the Kestrel schema, whose functions the reader role
    may not execute."""
    if name in catalog_names() and name not in allowed_names():
        return f"function {name}: {_why(name)} (attribute notation x.{name} calls {name}(x))"
    return None


def allowed_operators() -> frozenset[str]:
    """The operator names an ad-hoc query may use: pg_catalog operators whose functions (every
    operator of that name) are on the function allowlist."""
    return _load("allowed_operators.txt")


def catalog_types() -> frozenset[str]:
    """Every type name in pg_catalog."""
    return _load("catalog_types.txt")


# Per kind of name: the names built in, what a schema-qualified one would run unchecked, and
# what a name refused is not.
_BUILTIN: dict[str, tuple[Callable[[], frozenset[str]], str, str]] = {
    "operator": (
        allowed_operators,
        "its function",
        "not a built-in operator whose functions are all on the allowlist (an operator runs its function)",
    ),
    "type": (
        catalog_types,
        "a domain's CHECK or the type's functions",
        "not a built-in type (a domain's CHECK or a type's functions would run unchecked)",
    ),
}


def _builtin_refusal(kind: str, names: list[str]) -> str | None:
    """Why the ``kind`` ``names`` (``[name]`` or ``[schema, name]``) is refused, or None: named
    with a schema other than pg_catalog, or not built in (``_BUILTIN``)."""
    builtin, runs, not_builtin = _BUILTIN[kind]
    *schema, name = names
    if schema and schema != ["pg_catalog"]:
        return (
            f"{kind} {'.'.join(names)}: only pg_catalog {kind}s may be named with a schema ({runs} would "
            "run unchecked); write it unqualified"
        )
    if name in builtin():
        return None
    return f"{kind} {name}: {not_builtin}"


def operator_refusal(names: list[str]) -> str | None:
    """Why the operator ``names`` (``[op]`` or ``[schema, op]``) is refused, or None."""
    return _builtin_refusal("operator", names)


def type_refusal(names: list[str]) -> str | None:
    """Why the type ``names`` (``[type]`` or ``[schema, type]``) is refused, or None."""
    return _builtin_refusal("type", names)


def relation_refusal(database: str | None, schema: str | None, name: str) -> str | None:
    """Why reading the relation ``[database.][schema.]name`` is refused, or None."""
    if database:
        return f"relation {database}.{schema}.{name}: relations of another database cannot be read"
    if schema in (None, "pg_catalog") and name in FILE_VIEWS:
        return f"relation {name}: reads the server's files or directories"
    return None
