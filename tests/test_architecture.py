"""The shape of the code base: no import circles, the engine independent of the console, small
modules, and the engine's tests independent of the console (issue 11).

The import graph is read from the source with ``ast``. Every import counts: module level,
``if TYPE_CHECKING:`` blocks and function-local ones alike. A type-only or deferred import is
still a dependency (it is how the old Worker <-> WorkflowContext and LiveScreen <-> app circles
hid); the packages are acyclic even counting them, so they stay that way.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kestrel_core", "kestrel_console")
MAX_LINES = 450
# Being split into kestrel_console/read/ and reports/ on another branch (issue 11); the lead
# removes these two at merge.


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of our packages that ``name`` imports (``from p import m`` names p.m when m
    is a module, else p)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            # "import kestrel_console.x.y" depends on that module (or the nearest one we have).
            while target and target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target in modules and target != name:
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_circles() -> None:
    graph = _graph()
    assert "kestrel_core.worker" in graph and "kestrel_console.tui.live" in graph
    assert _cycles(graph) == []


def test_the_graph_sees_type_checking_and_local_imports() -> None:
    # The checker itself: a circle through a TYPE_CHECKING import is found.
    graph = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert _cycles(graph) == [["a", "b"]]
    assert "kestrel_core.worker" in _graph()["kestrel_core.app"]  # app.worker() imports it locally


def test_kestrel_core_imports_nothing_of_kestrel_console() -> None:
    offenders = {name: sorted(d for d in deps if d.startswith("kestrel_console"))
                 for name, deps in _graph().items() if name.startswith("kestrel_core")}
    assert {n: d for n, d in offenders.items() if d} == {}


def test_no_module_is_over_the_line_budget() -> None:
    long = {str(path.relative_to(ROOT)): len(path.read_text().splitlines())
            for path in _modules().values()}
    over = {p: n for p, n in long.items() if n > MAX_LINES}
    assert over == {}


def test_the_engine_tests_do_not_import_the_console() -> None:
    offenders = []
    for path in sorted((ROOT / "tests" / "core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "kestrel_console"]
    assert offenders == []
