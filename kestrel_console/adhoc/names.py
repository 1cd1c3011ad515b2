"""Names in SQL as Postgres lexes and resolves them, shared by the guard's checks."""

from __future__ import annotations

import re

from sqlglot import exp

__all__ = ["IDENT", "IDENT_START", "TOKEN", "folded", "is_name", "unquoted"]

# Postgres' lexer: identifiers start with a letter, _ or any non-ASCII character and go on with
# those, digits and $.
IDENT_START = "A-Za-z_\u0080-\U0010ffff"
IDENT = re.compile(f"[{IDENT_START}][{IDENT_START}0-9$]*")
# A skeleton's tokens, for the lexical backstop: quoted identifiers, words, single characters.
TOKEN = re.compile(f'"(?:[^"]|"")*"|[{IDENT_START}][{IDENT_START}0-9$]*|[0-9]+|\\S')


def is_name(token: str) -> bool:
    """Whether a TOKEN is an identifier (quoted or not)."""
    return token.startswith('"') or IDENT.fullmatch(token) is not None


def unquoted(token: str) -> tuple[str, bool]:
    """The name Postgres resolves: quoted names as written, others folded to lower case."""
    if token.startswith('"'):
        return token[1:-1].replace('""', '"'), True
    return token.lower(), False


def folded(identifier: exp.Expression) -> str:
    """The name Postgres resolves for one of sqlglot's identifiers."""
    name = identifier.name
    return name if isinstance(identifier, exp.Identifier) and identifier.quoted else name.lower()
