"""The console renders its statements through kestrel_core.db.statements.render, whose format
rules (psycopg.sql) want a literal brace written twice ('{{}}' for an empty array) (issue 11)."""

from __future__ import annotations

import kestrel_console
from kestrel_core.db.statements import render
from tests.core.test_statements import _statements


def test_every_statement_the_console_renders_is_a_valid_format_string() -> None:
    statements = _statements(kestrel_console)
    assert len(statements) > 10
    for module, name, text in statements:
        assert '"kx_schema"' in render(text, "kx_schema").as_string(None), (module, name)
