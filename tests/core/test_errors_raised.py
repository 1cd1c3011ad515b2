"""Every error ``kestrel_core`` exports is one it raises (or the base of one it raises):
an exported error nothing raises is a promise to users that never holds."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import kestrel_core


def constructed_names(package_dir: Path) -> set[str]:
    """Names called (``Name(...)``, ``mod.Name(...)``) or raised bare anywhere in the package."""
    names: set[str] = set()
    for path in package_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            target = node.func if isinstance(node, ast.Call) else node.exc if isinstance(node, ast.Raise) else None
            if isinstance(target, ast.Name):
                names.add(target.id)
            elif isinstance(target, ast.Attribute):
                names.add(target.attr)
    return names


def unraised(errors: list[type[BaseException]], package_dir: Path) -> list[str]:
    constructed = constructed_names(package_dir)
    raised = {e for e in errors if e.__name__ in constructed}
    used = {base for e in raised for base in e.__mro__}  # a base class is raised through its subclasses
    return sorted(e.__name__ for e in errors if e not in used)


def test_every_exported_error_is_raised_somewhere():
    exported = [getattr(kestrel_core, name) for name in kestrel_core.__all__]
    errors = [e for e in exported if inspect.isclass(e) and issubclass(e, BaseException)]
    assert len(errors) >= 10
    assert unraised(errors, Path(kestrel_core.__file__).parent) == []
