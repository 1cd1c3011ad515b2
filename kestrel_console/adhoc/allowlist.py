"""Which functions an ad-hoc query may name: the allowlist shipped with the package.

``allowed_functions.txt`` and ``catalog_functions.txt`` are generated from the catalog of
PostgreSQL 15 by ``allowlist_build.py`` (run by hand, output reviewed and committed; its
docstring says how). Everything not on the allowlist is refused with a reason naming it:
volatile catalog functions, reviewed exclusions (SQL-text runners, file readers, locks...),
functions of any other schema (extensions, Kestrel's own, users').
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from .allowlist_build import excluded

__all__ = ["allowed_names", "attribute_refusal", "call_refusal", "catalog_names", "keywords"]

KESTREL_ACTIONS = frozenset({"decide_approval", "cancel_execution", "requeue_execution",
                             "prune_finished"})


@cache
def _load(filename: str) -> frozenset[str]:
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines()
                     if line.strip() and not line.startswith("#"))


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


def keywords() -> frozenset[str]:
    """PostgreSQL's SQL keywords (lower case)."""
    return _load("keywords.txt")
