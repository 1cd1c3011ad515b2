"""String literals in kestrel_console that read like SQL but are not statements the console
runs: messages and help text shown to the operator. Every other statement lives in a ``.sql``
file beside the module that runs it (kestrel_core/db/sql_files.py). Keyed by (path, the literal's
stripped text; for an f-string, the stripped text of its literal part), with the reason."""

from __future__ import annotations

REFUSAL = "a refusal message shown to the operator (names the SQL it refuses), not a statement"

ALLOWED_SQL_TEXT: dict[tuple[str, str], str] = {
    ("kestrel_console/adhoc/guard.py", "EXPLAIN of nothing: give it a query"): REFUSAL,
    ("kestrel_console/adhoc/guard.py", "EXPLAIN of a write:"): REFUSAL,
    ("kestrel_console/adhoc/guard.py", "EXPLAIN of a non-read:"): REFUSAL,
    ("kestrel_console/adhoc/guard.py", "SELECT ... INTO creates a table"): REFUSAL,
    (
        "kestrel_console/adhoc/read_only.py",
        "EXPLAIN with query parameters: explain the query with its values written in",
    ): REFUSAL,
    (
        "kestrel_console/adhoc/read_only.py",
        "COPY is not supported here: run a query (SELECT, WITH, VALUES, EXPLAIN, SHOW)",
    ): REFUSAL,
    (
        "kestrel_console/tui/screens/sql.py",
        "SELECT status, count(*)\n  FROM workflow_executions\n GROUP BY status\n ORDER BY 2 DESC;",
    ): "the SQL screen's example query, shown in the editor for the operator to edit and run",
}
