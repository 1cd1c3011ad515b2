"""Packaging that fits the users (issue 19): ``pip install kestrel`` brings the engine and only
what it imports (plain psycopg, psycopg-pool, croniter); the console is the ``console`` extra
and says so in one line when it is missing; ``dev`` brings everything the README's quick
start and CI need.

Installing into a fresh venv is too slow for the suite; these read the declared and installed
metadata and the engine's imports instead.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from kestrel_console import entry

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ENGINE_DEPENDENCIES = {"psycopg", "psycopg-pool", "croniter"}
# Distribution name -> the module the engine imports.
IMPORT_NAMES = {"psycopg": "psycopg", "psycopg-pool": "psycopg_pool", "croniter": "croniter"}
CONSOLE_ONLY = {"textual", "rich", "typer", "pglast", "tree-sitter", "tree-sitter-sql", "sqlglot", "prometheus-client"}


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement)[0].lower().replace("_", "-")


def _extras(requirement: str) -> set[str]:
    found = re.match(r"[A-Za-z0-9._-]+\s*\[([^\]]*)\]", requirement)
    return {e.strip() for e in found[1].split(",")} if found else set()


def test_the_engine_depends_on_its_own_few_libraries_and_plain_psycopg() -> None:
    base = PROJECT["dependencies"]
    assert {_name(r) for r in base} == ENGINE_DEPENDENCIES
    assert [_extras(r) for r in base] == [set()] * len(base)  # no psycopg[binary]
    extras = PROJECT["optional-dependencies"]
    assert {_name(r) for r in extras["console"]} == CONSOLE_ONLY
    assert {_name(r) for r in extras["binary"]} == {"psycopg"} and _extras(extras["binary"][0]) == {"binary"}
    assert "kestrel[console,binary]" in extras["dev"]  # the quick start's `pip install -e '.[dev]'`
    assert "kestrel[console]" in extras["embedded"]  # the demo's bundled server, for the console
    assert {"ruff", "mypy", "pytest"} <= {_name(r) for r in extras["dev"]}


def test_the_installed_metadata_says_the_same() -> None:
    # What pip resolves for a plain `pip install kestrel`: the requirements without an extra marker.
    plain = {_name(r) for r in metadata.requires("kestrel") or [] if "extra ==" not in r}
    assert plain == ENGINE_DEPENDENCIES, "stale install? pip install -e '.[dev]' again"


# The one optional import of the engine, deliberately: OpenTelemetry (the ``otel`` extra), only
# in kestrel_core/base/tracing.py and only inside the functions that run once enable_tracing()
# was called; the engine imports and runs without it (tests/core/test_tracing.py checks that
# with the package made unimportable).
OPTIONAL_IMPORTS = {"kestrel_core/base/tracing.py": {"opentelemetry"}}


def test_the_engine_imports_nothing_beyond_its_dependencies() -> None:
    allowed = set(IMPORT_NAMES.values()) | {"kestrel_core"} | set(sys.stdlib_module_names)
    outside: set[str] = set()
    for path in sorted((ROOT / "kestrel_core").rglob("*.py")):
        optional = OPTIONAL_IMPORTS.get(str(path.relative_to(ROOT)), set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                tops = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                tops = {node.module.split(".")[0]}
            else:
                continue
            outside |= {f"{path.relative_to(ROOT)}: {top}" for top in tops if top not in allowed | optional}
    assert outside == set()


def test_the_optional_import_is_inside_functions_and_its_extra_is_declared() -> None:
    """A module-level import of OpenTelemetry would make it a dependency of every engine import."""
    extras = PROJECT["optional-dependencies"]
    assert {_name(r) for r in extras["otel"]} == {"opentelemetry-api", "opentelemetry-sdk"}
    for relative, names in OPTIONAL_IMPORTS.items():
        tree = ast.parse((ROOT / relative).read_text())
        for node in tree.body:  # module level only
            if isinstance(node, ast.Import | ast.ImportFrom):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                assert (module or "").split(".")[0] not in names, f"{relative}: module-level import of {module}"


def test_the_script_guard_checks_the_console_extras_libraries() -> None:
    assert set(entry.CONSOLE_LIBRARIES) <= CONSOLE_ONLY
    assert PROJECT["scripts"]["kestrel-console"] == "kestrel_console.entry:main"


def test_without_the_console_extra_the_script_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "textual", None)  # `import textual` fails as if not installed
    with pytest.raises(SystemExit) as exited:
        entry.main()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "error: kestrel-console needs the console extra (textual is not installed): pip install 'kestrel[console]'\n"
    )


def test_ci_installs_from_constraints_that_pin_every_declared_dependency() -> None:
    pins = {
        _name(line): line
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert all("==" in line for line in pins.values())
    extras = PROJECT["optional-dependencies"]
    declared = {_name(r) for r in [*PROJECT["dependencies"], *extras["console"], *extras["binary"], *extras["dev"]]}
    assert declared - {"kestrel"} <= set(pins)
    assert "pip install -q -c constraints.txt -e '.[dev]'" in (ROOT / ".ci" / "run").read_text()


def test_ci_checks_lint_format_and_types_before_the_tests() -> None:
    # A drift (a lint, a reformat, a type error) fails CI in seconds, before the long suite.
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    tests = lines.index(".venv/bin/python -m pytest")
    for check in (".venv/bin/ruff check .", ".venv/bin/ruff format --check .", ".venv/bin/mypy"):
        assert check in lines[:tests], f"{check} must run in .ci/run before the tests"


def test_the_wheel_ships_every_statement_file_beside_its_module() -> None:
    """hatchling's wheel takes every file under the listed package directories except what git
    ignores or the target excludes: so each ``.sql`` beside a module (which the module reads at
    import, db/sql_files.py) ships as long as the target lists whole packages, excludes nothing,
    and git ignores none of them. (Checked against a built wheel with ``pip wheel --no-deps .``;
    building one here would take the suite to the network.)"""
    target = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert set(target["packages"]) == {"kestrel_core", "kestrel_console"}
    assert not {"only-include", "exclude", "include", "sources", "only-packages"} & set(target), target
    files = [
        str(path.relative_to(ROOT))
        for package in target["packages"]
        for path in sorted((ROOT / package).rglob("*.sql"))
        if path.with_suffix(".py").exists()
    ]
    assert len(files) >= 20
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *files], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert ignored.returncode == 1 and ignored.stdout == "", (
        f"ignored by git, so left out of the wheel: {ignored.stdout}"
    )
