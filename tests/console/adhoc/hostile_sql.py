"""The string-continuation bypass of issue 18 and its variants: shared by the guard, CLI,
report and TUI tests.

Postgres joins two string literals separated by whitespace holding a newline, and the joined
segment keeps the first one's kind: after ``E'a'`` the next segment is an escape string too,
where ``\\'`` is a quote. A lexer that misses this reads what follows as string text. Each
shape ends its string before ``AS x,`` and runs CODE (which may hold no single quote: dollar
quotes serve instead); ``--'`` comments out the rest.
"""

from __future__ import annotations

# The first segment, then the whitespace (newline, comments) before the continuation.
OPENERS = [
    "E'a'\n",
    "e''\n",
    "E'a'  \t\n  ",
    "E'a'\r\n",
    "E'a'\r",
    "E'a'\n-- a comment in the continuation whitespace\n",
    "E'a' -- a comment before the newline\n",
    "E'a'\n\n-- two\n--comments\n",
    "E'a'\n'x'\n",  # three segments
    "E'\\\\'\n",  # the first segment ends in an escaped backslash
]

# Code the guard must refuse, each with the function it names (no single quotes inside).
CODES = [
    ("set_config($$role$$, $$none$$, true)", "set_config"),
    ("set_config($$work_mem$$, $$1TB$$, false)", "set_config"),
    ("pg_advisory_lock(hashtext($$kestrel.migrate$$))", "pg_advisory_lock"),
    ("txid_current()", "txid_current"),
    ("lo_from_bytea(0, $$x$$::bytea)", "lo_from_bytea"),
    ("query_to_xml($$SELECT pg_ls_dir($x$.$x$)$$, true, true, $$$$)", "query_to_xml"),
    ("pg_terminate_backend(pg_backend_pid())", "pg_terminate_backend"),
    ("pg_create_logical_replication_slot($$kt_slot$$, $$test_decoding$$)", "pg_create_logical_replication_slot"),
    ("pg_read_file($$PG_VERSION$$)", "pg_read_file"),
]


def shape(code: str, opener: str = OPENERS[0]) -> str:
    """The issue's shape: ``SELECT E'a'`` newline ``'b\\' , 1 AS ' AS x, CODE --'``."""
    return f"SELECT {opener}'b\\' , 1 AS ' AS x, {code} --'"


# Every opener with every code.
SHAPES = [(shape(code, opener), name) for opener in OPENERS for code, name in CODES]
