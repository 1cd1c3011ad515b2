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
# Literals that look like a statement and are none: (path, the whole literal stripped, a
# regular expression) -> why.
NOT_STATEMENTS = {
    ("kestrel_core/db/migrate.py", r"CREATE \(\?:UNLOGGED .*"): "the regular expression that finds the "
    "relations a migration file creates",
    ("kestrel_core/db/roles.py", r"(INSERT|UPDATE) \(.*"): "column privileges of WORKER_WRITES, the "
    "privilege list of one GRANT (roles.sql, grant_worker_writes)",
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
    [
        "kestrel_core",
        pytest.param(
            "kestrel_console",
            marks=pytest.mark.xfail(strict=False, reason="console statements move in the sqlcon branch"),
        ),
    ],
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


def test_every_statement_of_a_file_is_used_by_its_module() -> None:
    files = _files_beside_modules()
    assert len(files) >= 20  # the engine's files are found (an empty search is no pass)
    unused = []
    for path in files:
        module = path.with_suffix(".py")
        strings = {
            node.value
            for node in ast.walk(ast.parse(module.read_text(), str(module)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
        names = parse_statements(path.read_text(encoding="utf-8"), str(path))
        unused += [f"{path.relative_to(ROOT)}: {name}" for name in names if name not in strings]
    assert unused == [], "a statement its module does not name: remove it, or name it where it runs"
