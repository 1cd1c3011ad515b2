"""The shape of the code base: no import circles, the engine independent of the console, small
modules, the engine's tests independent of the console (issue 11); layers with no upward edge,
the layer rules the engine's docstrings state, and the engine's declared surface for the
console and bench: kestrel_core's names and each package's __all__, no module behind them
(issue 19).

The graph grouped by layer: ``.venv/bin/python -m tests.test_architecture`` (or
``pytest -s tests/test_architecture.py -k prints``).

The import graph is read from the source with ``ast``. Every import counts: module level,
``if TYPE_CHECKING:`` blocks and function-local ones alike. A type-only or deferred import is
still a dependency (it is how the old Worker <-> WorkflowContext and LiveScreen <-> app circles
hid); the packages are acyclic even counting them, so they stay that way.
"""

from __future__ import annotations

import ast
import functools
import importlib
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
    """The import graph, a fresh copy each call (parsed once per process: the sources do not
    change during a run)."""
    return {name: set(deps) for name, deps in _parsed_graph().items()}


@functools.cache
def _parsed_graph() -> dict[str, frozenset[str]]:
    modules = _modules()
    return {name: frozenset(_imported(name, path, modules)) for name, path in modules.items()}


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
    assert "kestrel_core.engine.worker" in graph and "kestrel_console.tui.live" in graph
    assert _cycles(graph) == []


def test_the_graph_sees_type_checking_and_local_imports() -> None:
    # The checker itself: a circle through a TYPE_CHECKING import is found.
    graph = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert _cycles(graph) == [["a", "b"]]
    assert "kestrel_core.engine.worker" in _graph()["kestrel_core.api.app"]  # app.worker() imports it locally


def test_kestrel_core_imports_nothing_of_kestrel_console() -> None:
    offenders = {
        name: sorted(d for d in deps if d.startswith("kestrel_console"))
        for name, deps in _graph().items()
        if name.startswith("kestrel_core")
    }
    assert {n: d for n, d in offenders.items() if d} == {}


def test_process_supervision_is_the_clis_not_the_engines() -> None:
    """Running N worker processes (pipes, process groups, prctl) is the command line's job: an
    application that embeds a worker carries none of it (kestrel_console/cli/supervision)."""
    graph = _graph()
    spawning = {"subprocess", "selectors"}
    offenders = {}
    for name, path in _modules().items():
        if name.startswith("kestrel_core"):
            tree = ast.parse(path.read_text(), str(path))
            imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            if used := imported & spawning:
                offenders[name] = sorted(used)
    assert offenders == {}
    assert "kestrel_console.cli.supervision.supervisor" in graph
    assert not any(n.startswith("kestrel_core") and n.rpartition(".")[2].startswith("supervis") for n in graph)


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
# The engine: a module's layer is its package (kestrel_core.<package>.<module>). Each package may
# import its own modules and the packages it lists here, all of them earlier in the table: so the
# packages form layers, bottom first, with no upward (nor sideways: durable and admin are
# siblings) edge.
# Its __init__ docstring says the same in its "May import:" line (checked). A new module goes in
# the package of its concern; a new package needs a line here and a docstring.
CORE_PACKAGES: dict[str, tuple[str, ...]] = {
    "lifecycle": (),
    "base": ("lifecycle",),
    "db": ("base",),
    "dispatch": ("base", "db"),
    "durable": ("base", "db", "dispatch"),
    "admin": ("base", "db", "dispatch"),
    "workflow": ("base", "db", "dispatch", "durable"),
    "engine": ("base", "db", "dispatch", "durable", "admin", "workflow"),
    "api": ("base", "db", "dispatch", "durable", "admin", "workflow", "engine"),
}
# kestrel_core itself (its __init__, the public surface) re-exports from any of them.
SURFACE = "public surface"
# The console: layers of its top-level modules and packages, bottom first; a module may import
# its own layer or those below.
CONSOLE_LAYERS: dict[str, tuple[str, ...]] = {
    "basics": ("safe_text", "humanize", "style", "settings", "timeline_model"),
    "data": ("adhoc", "reports", "read", "embedded_pg"),
    "presentation": ("formatting", "render", "demo", "metrics"),
    "front ends": ("cli", "tui"),
    "entry": ("entry", "__main__", ""),
}
# Rules written in the modules' docstrings, checked as direct imports whatever the layers say.
STATED_RULES = [
    # kestrel_core/workflow/contracts.py: context and worker depend on the contracts, not on
    # each other, and the worker not on the app.
    ("kestrel_core.workflow.context", "kestrel_core.engine.worker"),
    ("kestrel_core.engine.worker", "kestrel_core.workflow.context"),
    ("kestrel_core.workflow.async_context", "kestrel_core.engine.worker"),
    ("kestrel_core.engine.worker", "kestrel_core.workflow.async_context"),
    ("kestrel_core.engine.worker", "kestrel_core.api.app"),
    # kestrel_console/tui/host.py: live.py must not import app.py (which imports every screen).
    ("kestrel_console.tui.live", "kestrel_console.tui.app"),
    # kestrel_console/settings.py: the CLI's options must not import the SQL guard (pglast).
    ("kestrel_console.settings", "kestrel_console.adhoc"),
]


def _layer_of(module: str) -> tuple[str, int, str]:
    """(package, layer index, layer name) of one of our modules; KeyError names the module."""
    package, _, rest = module.partition(".")
    part = rest.split(".")[0]
    if package == "kestrel_core":
        if not rest:
            return package, len(CORE_PACKAGES), SURFACE
        if part in CORE_PACKAGES:
            return package, list(CORE_PACKAGES).index(part), part
        raise KeyError(
            f"{module} is in no package of tests/test_architecture.py's CORE_PACKAGES: move it into "
            "the package of its concern (kestrel_core/<package>/), or add the new package there"
        )
    for index, (name, members) in enumerate(CONSOLE_LAYERS.items()):
        if part in members:
            return package, index, name
    raise KeyError(f"{module} is in no layer of tests/test_architecture.py: add it where it belongs")


def _may_import(package: str, name: str, dep_name: str, level: int, dep_level: int) -> bool:
    if package != "kestrel_core":
        return dep_level <= level
    return name in (SURFACE, dep_name) or dep_name in CORE_PACKAGES[name]


def _package_edges(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The engine's packages and the other packages they import."""
    edges: dict[str, set[str]] = {name: set() for name in CORE_PACKAGES}
    for module, deps in graph.items():
        if module.startswith("kestrel_core."):
            name = _layer_of(module)[2]
            edges[name] |= {
                d for d in (_layer_of(dep)[2] for dep in deps if dep.startswith("kestrel_core.")) if d != name
            }
    return edges


def render_graph(graph: dict[str, set[str]] | None = None) -> str:
    """The import graph, one line per module, grouped by package and layer (bottom first)."""
    graph = graph or _graph()
    lines = ["kestrel_core: packages, bottom first (imports / may import)"]
    edges = _package_edges(graph)
    used = {name: ", ".join(p for p in CORE_PACKAGES if p in edges[name]) or "-" for name in CORE_PACKAGES}
    width = max(len(u) for u in used.values())
    for name, allowed in CORE_PACKAGES.items():
        lines.append(f"  {name:<9} imports {used[name]:<{width}}  may import {', '.join(allowed) or 'nothing of ours'}")
    layers = [(n, n) for n in CORE_PACKAGES] + [(SURFACE, "kestrel_core (__init__: the public names)")]
    sections = [("kestrel_core", layers), ("kestrel_console", [(n, n) for n in CONSOLE_LAYERS])]
    for package, names in sections:
        lines.append(f"{package}")
        for index, (name, title) in enumerate(names):
            lines.append(f"  [{index}] {title}")
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
    """Each edge from a module to a package (engine) or layer (console) it may not import."""
    upward = []
    for module, deps in sorted(graph.items()):
        package, level, name = _layer_of(module)
        for dep in sorted(deps):
            dep_package, dep_level, dep_name = _layer_of(dep)
            if dep_package == package and not _may_import(package, name, dep_name, level, dep_level):
                upward.append(f"{module} ({name}) -> {dep} ({dep_name})")
    return upward


def _broken_rules(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return [(a, b) for a, b in STATED_RULES if any(d == b or d.startswith(b + ".") for d in graph.get(a, set()))]


def test_no_import_goes_up_a_layer() -> None:
    assert _upward(_graph()) == []


def test_the_engine_packages_are_layers() -> None:
    # Each package lists only packages earlier in the table (below it): the table has no circle.
    order = list(CORE_PACKAGES)
    assert {p: [d for d in deps if order.index(d) >= order.index(p)] for p, deps in CORE_PACKAGES.items()} == {
        p: [] for p in CORE_PACKAGES
    }
    assert sorted(p.name for p in (ROOT / "kestrel_core").iterdir() if (p / "__init__.py").exists()) == sorted(order), (
        "every subpackage of kestrel_core has a line in CORE_PACKAGES"
    )
    assert sorted(p.name for p in (ROOT / "kestrel_core").glob("*.py")) == ["__init__.py"]


def test_each_package_docstring_states_what_it_may_import() -> None:
    stated = {}
    for name in CORE_PACKAGES:
        doc = ast.get_docstring(ast.parse((ROOT / "kestrel_core" / name / "__init__.py").read_text())) or ""
        line = doc.partition("May import:")[2].strip().split(".")[0]
        stated[name] = () if line.startswith("nothing") else tuple(p.strip() for p in line.split(","))
    assert stated == CORE_PACKAGES


def test_the_rules_stated_in_the_docstrings_hold() -> None:
    graph = _graph()
    assert _broken_rules(graph) == []
    assert all(a in graph for a, _ in STATED_RULES)  # a renamed module must not void its rule


def test_the_layer_checks_catch_an_upward_import_and_a_broken_rule() -> None:
    graph = {
        "kestrel_core.base.errors": {"kestrel_core.engine.worker"},
        "kestrel_core.engine.worker": set(),
        "kestrel_core.workflow.context": {"kestrel_core.engine.worker"},
        "kestrel_core.admin.prune": {"kestrel_core.durable.waits"},  # siblings: sideways
        "kestrel_core.durable.waits": {"kestrel_core.db.statements"},  # down: allowed
        "kestrel_core.db.statements": set(),
        "kestrel_console.settings": {"kestrel_console.adhoc.guard", "kestrel_core.api.app"},
    }
    assert _upward(graph) == [
        "kestrel_console.settings (basics) -> kestrel_console.adhoc.guard (data)",
        "kestrel_core.admin.prune (admin) -> kestrel_core.durable.waits (durable)",
        "kestrel_core.base.errors (base) -> kestrel_core.engine.worker (engine)",
        "kestrel_core.workflow.context (workflow) -> kestrel_core.engine.worker (engine)",
    ]
    assert _broken_rules(graph) == [
        ("kestrel_core.workflow.context", "kestrel_core.engine.worker"),
        ("kestrel_console.settings", "kestrel_console.adhoc"),
    ]
    try:
        _layer_of("kestrel_core.newthing")
    except KeyError as exc:
        assert "kestrel_core.newthing is in no package" in str(exc)
    else:
        raise AssertionError("a module outside the packages must have no layer")


def test_prints_the_import_graph_by_layer() -> None:
    text = render_graph()
    print(text)
    assert (
        "[0] lifecycle" in text
        and "[1] base" in text
        and "kestrel_core.engine.worker -> " in text
        and "[3] front ends" in text
    )
    assert "  engine    imports " in text


# -- the engine's public surface (issue 19) ------------------------------------------------------
# The front ends (the console, bench) use what the engine declares: kestrel_core's own names and
# each package's __all__ (``from kestrel_core.db import connect``), psycopg/Textual style. The
# modules behind a package are the engine's own: a front end that imports one, or a name its
# package does not declare, fails here. Inside the engine it is the other way round: modules
# import modules (``from kestrel_core.db.statements import render``), never a package's
# re-exports, so that loading a package __init__ (which imports its modules) never goes round
# through a module of its own that is still loading.
FRONT_ENDS = ("kestrel_console", "bench")


def declared() -> dict[str, set[str]]:
    """What the front ends may import: ``kestrel_core`` and each of its packages, by __all__."""
    surface = {"kestrel_core": set(kestrel_core.__all__)}
    for name in CORE_PACKAGES:
        package = importlib.import_module(f"kestrel_core.{name}")
        surface[package.__name__] = set(getattr(package, "__all__", ()))
    return surface


def _is_module(name: str) -> bool:
    where = ROOT.joinpath(*name.split("."))
    return where.with_suffix(".py").exists() or where.is_dir()


def _core_imports(path: Path, surface: dict[str, set[str]]) -> set[str]:
    """What ``path`` takes from kestrel_core beyond the declared surface: a module
    (``kestrel_core.db.roles``), or ``package:Name`` for a name that package does not declare."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("kestrel_core.")}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module != "kestrel_core" and not node.module.startswith("kestrel_core."):
                continue
            if node.module not in surface:  # kestrel_core.<package>.<module>
                found.add(node.module)
                continue
            for alias in node.names:
                if alias.name not in surface[node.module]:
                    found.add(f"{node.module}:{alias.name}")
    return found


def _front_end_imports(surface: dict[str, set[str]]) -> dict[str, set[str]]:
    users = {name: path for name, path in _modules().items() if name.startswith("kestrel_console")}
    for path in (ROOT / "bench").rglob("*.py"):
        users[".".join(path.relative_to(ROOT).with_suffix("").parts)] = path
    assert {u.split(".")[0] for u in users} == set(FRONT_ENDS)
    return {name: used for name, path in users.items() if (used := _core_imports(path, surface))}


def test_the_front_ends_use_only_the_declared_surface() -> None:
    assert _front_end_imports(declared()) == {}, (
        "import kestrel_core's names, or a name a package declares in its __all__ (add it there "
        "when a front end needs it), never a module of the engine"
    )


def test_every_package_declares_its_surface() -> None:
    surface = declared()
    for name in CORE_PACKAGES:
        package = importlib.import_module(f"kestrel_core.{name}")
        assert hasattr(package, "__all__"), f"kestrel_core/{name}/__init__.py declares no __all__"
        for public in surface[package.__name__]:
            # A declared name exists, and is a name, not a module: `from kestrel_core.admin import
            # prune` must not mean the module in one place and a function in another.
            assert hasattr(package, public), f"kestrel_core.{name} declares {public} but has none"
            assert not _is_module(f"kestrel_core.{name}.{public}"), f"kestrel_core.{name}.{public} is a module"


def _reexport_imports(path: Path) -> set[str]:
    """The names ``path`` (an engine module) imports from a package's __init__ rather than
    from the module that defines them."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            parts = node.module.split(".")
            if parts[0] == "kestrel_core" and len(parts) == 2:
                found |= {f"{node.module}:{a.name}" for a in node.names if not _is_module(f"{node.module}.{a.name}")}
    return found


def test_the_engine_imports_modules_not_the_packages_reexports() -> None:
    offenders = {
        name: sorted(used)
        for name, path in _modules().items()
        if name.startswith("kestrel_core.") and path.name != "__init__.py" and (used := _reexport_imports(path))
    }
    assert offenders == {}


def test_the_surface_check_sees_internal_modules_and_undeclared_names(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(
        "from kestrel_core import Kestrel, db, _private_name\nfrom kestrel_core.admin import prune as p\n"
        "from kestrel_core.dispatch.claim import CLAIM\nimport kestrel_core.engine.worker\n"
        "from kestrel_core.db import connect, statements\nfrom kestrel_core.admin import parse_age\n"
    )
    assert _core_imports(user, declared()) == {
        "kestrel_core:db",
        "kestrel_core:_private_name",
        "kestrel_core.admin:prune",
        "kestrel_core.dispatch.claim",
        "kestrel_core.engine.worker",
        "kestrel_core.db:statements",
    }
    engine_module = tmp_path / "engine_module.py"
    engine_module.write_text("from kestrel_core.db import render, statements\nfrom kestrel_core.db.roles import X\n")
    assert _reexport_imports(engine_module) == {"kestrel_core.db:render"}


# -- privacy (issue 45) --------------------------------------------------------------------------
# An underscore name is its module's own: no other module of ours imports it (``from m import
# _x``) or reaches it through the module (``m._x``), nor, outside the tests, through a class or
# function it imports (``Imported._x``). A name another module needs is public, or lives in the
# module that uses it. Tests may reach into the objects they test (attributes of instances and
# classes), not into another module's namespace. Other libraries' private names are theirs.
PRIVACY_ROOTS = ("kestrel_core", "kestrel_console", "bench", "tests")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private_crossings(path: Path, at: Path | None = None) -> list[str]:
    """``file:line: what`` for each underscore name of one of our modules that ``path`` (read
    as standing at ``at`` in the tree, by default where it is) takes from another module."""
    at = at or path
    name = _module_name(at)
    package = name if at.name == "__init__.py" else name.rpartition(".")[0]
    tests = name.split(".")[0] == "tests"
    where = at.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(), str(path))
    bound: dict[str, str] = {}  # a local name an import binds -> the dotted name it stands for
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                if _is_private(alias.name) and base.split(".")[0] in PRIVACY_ROOTS and base != name:
                    found.append(f"{where}:{node.lineno}: imports {alias.name} from {base}")
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        chain, root = [], node.value
        while isinstance(root, ast.Attribute):
            chain.insert(0, root.attr)
            root = root.value
        if not isinstance(root, ast.Name) or root.id not in bound:
            continue
        owner = ".".join([bound[root.id], *chain])
        if owner.split(".")[0] not in PRIVACY_ROOTS or owner == name:
            continue
        if tests and not _is_module(owner):
            continue  # a test may reach into the class or object it tests
        found.append(f"{where}:{node.lineno}: uses {owner}.{node.attr}")
    return sorted(found, key=lambda line: int(line.split(":")[1]))


def _privacy_files() -> list[Path]:
    return sorted(p for root in PRIVACY_ROOTS for p in (ROOT / root).rglob("*.py"))


def test_no_underscore_name_crosses_modules() -> None:
    crossings = [line for path in _privacy_files() for line in _private_crossings(path)]
    assert crossings == [], (
        "an underscore name is private to its module: make it public where it is an API other "
        "modules share, or move it to the module that uses it:\n" + "\n".join(crossings)
    )


def test_the_privacy_check_sees_imports_module_attributes_and_imported_classes(tmp_path: Path) -> None:
    def crossings(relative: str, text: str) -> list[str]:
        # Read as if it stood at ``relative`` in the tree (its package gives relative imports
        # their meaning).
        probe = tmp_path / "probe.py"
        probe.write_text(text)
        return _private_crossings(probe, ROOT / relative)

    text = (
        "import os\nfrom kestrel_core.db import statements\nfrom .overview import _hidden\n"
        "from kestrel_core import Kestrel\nimport kestrel_core.db.statements as st\n"
        "os._exit\nstatements._cache\nst._cache\nKestrel._pool\nself._mine\n"
    )
    assert crossings("kestrel_console/read/x.py", text) == [
        "kestrel_console/read/x.py:3: imports _hidden from kestrel_console.read.overview",
        "kestrel_console/read/x.py:7: uses kestrel_core.db.statements._cache",
        "kestrel_console/read/x.py:8: uses kestrel_core.db.statements._cache",
        "kestrel_console/read/x.py:9: uses kestrel_core.Kestrel._pool",
    ]
    # A test may reach into a class it tests, never into another module's namespace.
    assert crossings("tests/core/x.py", text.replace("from .overview", "from tests.seed")) == [
        "tests/core/x.py:3: imports _hidden from tests.seed",
        "tests/core/x.py:7: uses kestrel_core.db.statements._cache",
        "tests/core/x.py:8: uses kestrel_core.db.statements._cache",
    ]


if __name__ == "__main__":
    sys.stdout.write(render_graph() + "\n")
