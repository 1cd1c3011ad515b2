"""Every statement the engine and the console run is in a ``.sql`` file beside the module that
runs it (kestrel_core/db/sql_files.py), where a DBA reads it under its name and comment: no
module holds one as a string literal, and no file keeps a statement its module no longer runs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from kestrel_core.db.sql_files import parse_statements

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kestrel_core", "kestrel_console")
KEYWORDS = (
    "SELECT|WITH|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|LOCK|SET|SHOW|TRUNCATE|GRANT|REVOKE|COPY|LISTEN|NOTIFY"
    "|DO|EXPLAIN|VACUUM|ANALYZE|CALL"
)
_STATEMENT = re.compile(rf"(?:{KEYWORDS})\s", re.IGNORECASE)
_REFUSAL = "a refusal message shown to the operator, naming the SQL it refuses"
_HELP = "prose shown to the operator (an option's help, a message) that starts with an SQL keyword"
# Literals that look like a statement and are none: (path, the whole literal stripped, a
# regular expression) -> why.
NOT_STATEMENTS = {
    ("kestrel_core/db/migrate.py", r"CREATE \(\?:UNLOGGED .*"): "the regular expression that finds the "
    "relations a migration file creates",
    ("kestrel_core/db/roles.py", r"(INSERT|UPDATE) \(.*"): "column privileges of WORKER_WRITES, the "
    "privilege list of one GRANT (roles.sql, grant_worker_writes)",
    (
        "kestrel_console/adhoc/guard.py",
        r"SELECT \.\.\. INTO creates a table|EXPLAIN of (nothing: .*|a write:|a non-read:)",
    ): _REFUSAL,
    ("kestrel_console/adhoc/read_only.py", r"(EXPLAIN with query parameters|COPY is not supported here): .*"): _REFUSAL,
    ("kestrel_console/tui/screens/sql.py", r"SELECT status, count\(\*\)\n  FROM workflow_executions\n.*"): (
        "the SQL screen's example query, put in the editor for the operator to edit and run"
    ),
    ("kestrel_console/cli/bulk_commands.py", r"With --(where|token): .*"): _HELP,
    ("kestrel_console/cli/demo_command.py", r"Do not enqueue .*"): _HELP,
    ("kestrel_console/cli/options.py", r"With --dry-run: .*"): _HELP,
    ("kestrel_console/cli/prune_command.py", r"Delete executions that finished .*|drop partition"): _HELP,
    ("kestrel_console/cli/read_commands.py", r"With --format json: .*"): _HELP,
    ("kestrel_console/cli/schedule_commands.py", r"Delete a schedule .*"): _HELP,
    ("kestrel_console/embedded_pg/account.py", r"Create it yourself \(useradd --system"): _HELP,
    ("kestrel_console/tui/event_flow.py", r"with payload"): _HELP,
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def looks_like_a_statement(text: str) -> bool:
    stripped = text.strip()
    return bool(_STATEMENT.match(stripped)) or ("\n" in stripped and " FROM " in text and "SELECT" in text)


def statement_literals(source: str, path: str) -> list[str]:
    """``path:line: text`` of each string literal of ``source`` that looks like a statement."""
    tree = ast.parse(source, path)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docstrings:
            continue
        text = node.value.strip()
        if looks_like_a_statement(node.value) and not any(
            where == path and re.fullmatch(pattern, text, re.DOTALL) for where, pattern in NOT_STATEMENTS
        ):
            found.append(f"{path}:{node.lineno}: {text[:60]!r}")
    return found


@pytest.mark.parametrize(
    "package",
    ["kestrel_core", "kestrel_console"],
)
def test_no_module_holds_a_statement_as_a_string(package: str) -> None:
    found = [
        hit
        for path in sorted((ROOT / package).rglob("*.py"))
        for hit in statement_literals(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == [], "move these into the .sql file beside their module (kestrel_core/db/sql_files.py)"


def test_the_check_sees_a_statement_and_passes_the_rest() -> None:
    source = '''"""A docstring: SELECT 1 FROM t is prose here."""
CLAIM = """
  with picked AS (SELECT 1)
SELECT 2"""
NOTE = "selected: a worker"
MESSAGE = f"DELETE FROM {table} refused"
LINES = """two lines, one
SELECT x FROM t"""
LABEL = "Selection"
PRIVILEGES = "UPDATE (id)"
'''
    found = sorted(hit.split(": ", 1)[0] for hit in statement_literals(source, "kestrel_core/db/roles.py"))
    assert found == ["kestrel_core/db/roles.py:2", "kestrel_core/db/roles.py:6", "kestrel_core/db/roles.py:7"]
    assert len(statement_literals(source, "kestrel_core/x.py")) == 4  # the allowance is per file


def _files_beside_modules() -> list[Path]:
    return sorted(
        path for package in PACKAGES for path in (ROOT / package).rglob("*.sql") if path.with_suffix(".py").exists()
    )


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def named_statements(source: str, path: str, modules: set[str]) -> dict[str, set[str]]:
    """Module -> the statement names ``source`` (the module ``path``) names: its own as a string
    or as ``SQL.name``, another module's (of ``modules``) as ``module.SQL.name``."""
    tree = ast.parse(source, path)
    me = _module_of(ROOT / path)
    statements = {"SQL": me}  # a name bound to a module's statements -> that module
    aliases = {}  # a name bound to a module -> that module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(me.split(".")[: -node.level] + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif alias.name == "SQL" and base in modules:
                    statements[alias.asname or alias.name] = base
        elif isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in modules})
    named: dict[str, set[str]] = {me: set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            named[me].add(node.value)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in statements:
            named.setdefault(statements[node.value.id], set()).add(node.attr)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "SQL"
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id in aliases
        ):
            named.setdefault(aliases[node.value.value.id], set()).add(node.attr)
    return named


def test_the_use_check_sees_a_statement_named_here_or_elsewhere() -> None:
    modules = {"kestrel_core.admin.actions", "kestrel_core.admin.queues", "kestrel_core.x"}
    source = """from kestrel_core.admin import actions as _operator
from .admin.queues import SQL as QUEUES_SQL
SQL = statements_beside(__file__)
run(SQL.mine, _operator.SQL.cancel, QUEUES_SQL.pause, other.SQL.not_resolved, "by_string")
"""
    named = named_statements(source, "kestrel_core/x.py", modules)
    assert named["kestrel_core.admin.actions"] == {"cancel"} and named["kestrel_core.admin.queues"] == {"pause"}
    assert {"mine", "by_string"} <= named["kestrel_core.x"] and "not_resolved" not in named["kestrel_core.x"]


def test_every_statement_of_a_file_is_used_by_its_module() -> None:
    files = _files_beside_modules()
    assert len(files) >= 20  # the engine's files are found (an empty search is no pass)
    sources = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    modules = {_module_of(path) for path in sources}
    named: dict[str, set[str]] = {}
    for module in sources:
        for target, names in named_statements(module.read_text(), str(module.relative_to(ROOT)), modules).items():
            named.setdefault(target, set()).update(names)
    unused = []
    for path in files:
        names = parse_statements(path.read_text(encoding="utf-8"), str(path))
        used = named.get(_module_of(path.with_suffix(".py")), set())
        unused += [f"{path.relative_to(ROOT)}: {name}" for name in names if name not in used]
    assert unused == [], "a statement no module names: remove it, or name it where it runs (SQL.name)"
