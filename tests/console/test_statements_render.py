"""The console renders its statements through kestrel_core.db.statements.render, whose format
rules (psycopg.sql) want a literal brace written twice ('{{}}' for an empty array) (issue 11).
A template with slots of its own (the executions search's ``{source}`` and ``{where}``,
composed where it runs) is checked with those slots filled by a name."""

from __future__ import annotations

import string

import kestrel_console
from kestrel_core.db.statements import fragments, render
from tests.core.test_statements import named_statements


def test_every_statement_the_console_renders_is_a_valid_format_string() -> None:
    statements = named_statements(kestrel_console)
    assert len(statements) > 10
    known = {"schema", *fragments("kx_schema")}
    for module, name, text in statements:
        slots = {field for _, field, _, _ in string.Formatter().parse(text) if field} - known
        for slot in slots:
            text = text.replace("{" + slot + "}", slot)
        assert '"kx_schema"' in render(text, "kx_schema").as_string(None), (module, name)
