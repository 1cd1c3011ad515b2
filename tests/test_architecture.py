"""The shape of the code base: no import circles, the engine independent of the console, small
modules, the engine's tests independent of the console (issue 11); layers with no upward edge,
the layer rules the engine's docstrings state, and the engine's public surface for the console
and bench, with today's uses of internals as a shrinking allowlist (issue 19).

The graph grouped by layer: ``.venv/bin/python -m tests.test_architecture`` (or
``pytest -s tests/test_architecture.py -k prints``).

The import graph is read from the source with ``ast``. Every import counts: module level,
``if TYPE_CHECKING:`` blocks and function-local ones alike. A type-only or deferred import is
still a dependency (it is how the old Worker <-> WorkflowContext and LiveScreen <-> app circles
hid); the packages are acyclic even counting them, so they stay that way.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import kestrel_core

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kestrel_core", "kestrel_console")
# A module over this does more than one job: split it. Counted as `ruff format` lays code out
# (one argument per line once a call does not fit), about a fifth longer than the dense layout
# the 450 of earlier days measured.
MAX_LINES = 600


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
    offenders = {
        name: sorted(d for d in deps if d.startswith("kestrel_console"))
        for name, deps in _graph().items()
        if name.startswith("kestrel_core")
    }
    assert {n: d for n, d in offenders.items() if d} == {}


def test_no_module_is_over_the_line_budget() -> None:
    long = {str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in _modules().values()}
    over = {p: n for p, n in long.items() if n > MAX_LINES}
    assert over == {}


def test_the_engine_tests_do_not_import_the_console() -> None:
    offenders = []
    for path in sorted((ROOT / "tests" / "core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "kestrel_console"]
    assert offenders == []


# -- layers (issue 19) ---------------------------------------------------------------------------
# Bottom first. A module may import modules of its own layer or of layers below, never above.
# A new module needs a line here: say where it sits.
CORE_LAYERS: dict[str, tuple[str, ...]] = {
    "foundation": (
        "errors",
        "statements",
        "serialization",
        "backoff",
        "cron",
        "supervised",
        "versions",
        "migrations",
        "keys",
        "outage",
    ),
    "database": (
        "connection",
        "migrate",
        "roles",
        "execution",
        "enqueue",
        "checkpoint",
        "waits",
        "enqueue_batch",
        "lease",
        "claim",
        "limited_claim",
        "boundary",
        "group_commit",
        "deadlines",
        "sweeper",
        "events",
        "children",
        "queues",
        "schedules",
        "scheduler",
        "prune",
        "operator",
    ),
    "contracts": ("runtime",),
    "workflow context": ("context", "async_context", "flow_context"),
    "worker engine": ("runner", "listener", "registration", "worker", "supervisor"),
    "public API": ("app", "async_client", ""),
}
CONSOLE_LAYERS: dict[str, tuple[str, ...]] = {
    "basics": ("safe_text", "humanize", "style", "settings", "timeline_model"),
    "data": ("adhoc", "reports", "read", "embedded_pg"),
    "presentation": ("formatting", "render", "demo"),
    "front ends": ("cli", "tui"),
    "entry": ("entry", "__main__", ""),
}
# Rules written in the modules' docstrings, checked as direct imports whatever the layers say.
STATED_RULES = [
    # kestrel_core/runtime.py: context and worker depend on the contracts, not on each other,
    # and the worker not on the app.
    ("kestrel_core.context", "kestrel_core.worker"),
    ("kestrel_core.worker", "kestrel_core.context"),
    ("kestrel_core.async_context", "kestrel_core.worker"),
    ("kestrel_core.worker", "kestrel_core.async_context"),
    ("kestrel_core.worker", "kestrel_core.app"),
    # kestrel_console/tui/host.py: live.py must not import app.py (which imports every screen).
    ("kestrel_console.tui.live", "kestrel_console.tui.app"),
    # kestrel_console/settings.py: the CLI's options must not import the SQL guard (pglast).
    ("kestrel_console.settings", "kestrel_console.adhoc"),
]


def _layer_of(module: str) -> tuple[str, int, str]:
    """(package, layer index, layer name) of one of our modules; KeyError names the module."""
    package, _, rest = module.partition(".")
    layers = CORE_LAYERS if package == "kestrel_core" else CONSOLE_LAYERS
    part = rest.split(".")[0]
    for index, (name, members) in enumerate(layers.items()):
        if part in members:
            return package, index, name
    raise KeyError(f"{module} is in no layer of tests/test_architecture.py: add it where it belongs")


def render_graph(graph: dict[str, set[str]] | None = None) -> str:
    """The import graph, one line per module, grouped by package and layer (bottom first)."""
    graph = graph or _graph()
    lines: list[str] = []
    for package, layers in (("kestrel_core", CORE_LAYERS), ("kestrel_console", CONSOLE_LAYERS)):
        lines.append(f"{package}")
        for index, name in enumerate(layers):
            lines.append(f"  [{index}] {name}")
            for module in sorted(m for m in graph if m.split(".")[0] == package and _layer_of(m)[1] == index):
                deps = sorted(graph[module])
                lines.append(f"      {module} -> {', '.join(deps) if deps else '(nothing of ours)'}")
    return "\n".join(lines)


def test_every_module_has_a_layer() -> None:
    missing = []
    for module in _graph():
        try:
            _layer_of(module)
        except KeyError as exc:
            missing.append(str(exc))
    assert missing == []


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Each edge from a module to a higher layer of its own package."""
    upward = []
    for module, deps in sorted(graph.items()):
        package, level, name = _layer_of(module)
        for dep in sorted(deps):
            dep_package, dep_level, dep_name = _layer_of(dep)
            if dep_package == package and dep_level > level:
                upward.append(f"{module} ({name}) -> {dep} ({dep_name})")
    return upward


def _broken_rules(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return [(a, b) for a, b in STATED_RULES if any(d == b or d.startswith(b + ".") for d in graph.get(a, set()))]


def test_no_import_goes_up_a_layer() -> None:
    assert _upward(_graph()) == []


def test_the_rules_stated_in_the_docstrings_hold() -> None:
    graph = _graph()
    assert _broken_rules(graph) == []
    assert all(a in graph for a, _ in STATED_RULES)  # a renamed module must not void its rule


def test_the_layer_checks_catch_an_upward_import_and_a_broken_rule() -> None:
    graph = {
        "kestrel_core.errors": {"kestrel_core.worker"},
        "kestrel_core.worker": set(),
        "kestrel_core.context": {"kestrel_core.worker"},
        "kestrel_console.settings": {"kestrel_console.adhoc.guard", "kestrel_core.app"},
    }
    assert _upward(graph) == [
        "kestrel_console.settings (basics) -> kestrel_console.adhoc.guard (data)",
        "kestrel_core.context (workflow context) -> kestrel_core.worker (worker engine)",
        "kestrel_core.errors (foundation) -> kestrel_core.worker (worker engine)",
    ]
    assert _broken_rules(graph) == [
        ("kestrel_core.context", "kestrel_core.worker"),
        ("kestrel_console.settings", "kestrel_console.adhoc"),
    ]


def test_prints_the_import_graph_by_layer() -> None:
    text = render_graph()
    print(text)
    assert "[0] foundation" in text and "kestrel_core.worker -> " in text and "[3] front ends" in text


# -- the engine's public surface (issue 19) ------------------------------------------------------
# The console and bench use `kestrel_core`'s own names (its __all__). Today they also reach into
# these internal modules: the list may only shrink. Remove a line when its import goes away
# (the test says so); an import of another internal module fails until it goes through the
# public names instead.
PUBLIC = set(kestrel_core.__all__)
KNOWN_INTERNAL_IMPORTS: dict[str, set[str]] = {
    "kestrel_console.adhoc.reader": {"kestrel_core.roles"},
    "kestrel_console.cli": {"kestrel_core.statements"},
    "kestrel_console.cli.engine_commands": {
        "kestrel_core.app",
        "kestrel_core.connection",
        "kestrel_core.roles",
        "kestrel_core.serialization",
    },
    "kestrel_console.cli.errors": {"kestrel_core.supervised"},
    "kestrel_console.cli.options": {"kestrel_core.operator"},
    "kestrel_console.cli.prune_command": {"kestrel_core.connection", "kestrel_core.prune", "kestrel_core.roles"},
    "kestrel_console.cli.read_commands": {"kestrel_core.connection", "kestrel_core.execution"},
    "kestrel_console.cli.schedule_commands": {"kestrel_core.cron", "kestrel_core.schedules"},
    "kestrel_console.cli.worker_command": {"kestrel_core.prune", "kestrel_core.supervised", "kestrel_core.supervisor"},
    "kestrel_console.demo.bot": {"kestrel_core.statements"},
    "kestrel_console.demo.database": {"kestrel_core.connection", "kestrel_core.roles"},
    "kestrel_console.demo.events": {"kestrel_core.statements"},
    "kestrel_console.demo.runner": {"kestrel_core.statements", "kestrel_core.worker"},
    "kestrel_console.read.executions": {"kestrel_core.execution"},
    "kestrel_console.read.overview": {"kestrel_core.execution"},
    "kestrel_console.read.reader": {"kestrel_core.execution"},
    "kestrel_console.read.session": {"kestrel_core.connection", "kestrel_core.migrate", "kestrel_core.statements"},
    "kestrel_console.settings": {"kestrel_core.app", "kestrel_core.connection", "kestrel_core.statements"},
    "kestrel_console.tui.adhoc_session": {"kestrel_core.connection"},
    "kestrel_console.tui.header": {"kestrel_core.connection"},
    "bench.ceiling": {"kestrel_core.boundary", "kestrel_core.claim", "kestrel_core.statements"},
    "bench.console": {"kestrel_core.statements"},
    "bench.ingest": {"kestrel_core.statements"},
    "bench.latency": {"kestrel_core.statements"},
    "bench.mvcc": {"kestrel_core.enqueue", "kestrel_core.statements"},
    "bench.recovery": {"kestrel_core.statements"},
    "bench.throughput": {"kestrel_core.enqueue", "kestrel_core.statements"},
}


def _core_imports(path: Path) -> set[str]:
    """What ``path`` takes from kestrel_core beyond its public names: internal modules, and
    ``kestrel_core:Name`` for a name the package does not export."""
    core = ROOT / "kestrel_core"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("kestrel_core.")}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == "kestrel_core":
                for alias in node.names:
                    if (core / f"{alias.name}.py").exists() or (core / alias.name).is_dir():
                        found.add(f"kestrel_core.{alias.name}")
                    elif alias.name not in PUBLIC:
                        found.add(f"kestrel_core:{alias.name}")
            elif node.module.startswith("kestrel_core."):
                found.add(node.module)
    return found


def _internal_imports() -> dict[str, set[str]]:
    users = {name: path for name, path in _modules().items() if name.startswith("kestrel_console")}
    for path in (ROOT / "bench").rglob("*.py"):
        users[".".join(path.relative_to(ROOT).with_suffix("").parts)] = path
    return {name: used for name, path in users.items() if (used := _core_imports(path))}


def test_the_console_and_bench_add_no_import_of_engine_internals() -> None:
    actual = _internal_imports()
    new = {m: sorted(used - KNOWN_INTERNAL_IMPORTS.get(m, set())) for m, used in actual.items()}
    assert {m: u for m, u in new.items() if u} == {}, (
        "use kestrel_core's public names (kestrel_core.__all__), or export what is needed there"
    )


def test_the_allowlist_of_internal_imports_only_shrinks() -> None:
    actual = _internal_imports()
    gone = {m: sorted(used - actual.get(m, set())) for m, used in KNOWN_INTERNAL_IMPORTS.items()}
    assert {m: u for m, u in gone.items() if u} == {}, "no longer imported: remove from KNOWN_INTERNAL_IMPORTS"


def test_the_surface_check_sees_internal_modules_and_unexported_names(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(
        "from kestrel_core import Kestrel, statements, _private_name\n"
        "from kestrel_core.claim import CLAIM\nimport kestrel_core.worker\n"
    )
    assert _core_imports(user) == {
        "kestrel_core.statements",
        "kestrel_core:_private_name",
        "kestrel_core.claim",
        "kestrel_core.worker",
    }


if __name__ == "__main__":
    sys.stdout.write(render_graph() + "\n")
