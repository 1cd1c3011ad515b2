"""The engine's public surface is complete and typed (issue 45, item 8): every kestrel_core class
that a public signature of an exported name takes or returns is exported too, and the package
says it is typed (py.typed), so users' type checkers see the annotations."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path

import kestrel_core


def _classes_in(annotation: object) -> set[type]:
    found: set[type] = set()
    if isinstance(annotation, type):
        found.add(annotation)
    for arg in typing.get_args(annotation):
        found |= _classes_in(arg)
    origin = typing.get_origin(annotation)
    if isinstance(origin, type):
        found.add(origin)
    return found


# Not users' to call: the engine builds a workflow's ctx, and the ctx calls its worker through
# the runtime protocol (kestrel_core.workflow.contracts.WorkerRuntime).
ENGINE_SIDE = {
    ("WorkflowContext", "__init__"),
    ("AsyncWorkflowContext", "__init__"),
    ("Worker", "__init__"),
    ("Worker", "commit"),
    ("Worker", "open_lazily"),
}


def _public_callables(obj: type) -> list[object]:
    members = [obj.__init__] if "__init__" in vars(obj) and (obj.__name__, "__init__") not in ENGINE_SIDE else []
    for name, member in inspect.getmembers(obj):
        if name.startswith("_") or (obj.__name__, name) in ENGINE_SIDE:
            continue
        if isinstance(member, property) and member.fget is not None:
            members.append(member.fget)
        elif callable(member):
            members.append(member)
    return members


def test_every_engine_type_in_a_public_signature_is_exported() -> None:
    exported = {getattr(kestrel_core, name) for name in kestrel_core.__all__}
    missing: set[str] = set()
    for name in kestrel_core.__all__:
        obj = getattr(kestrel_core, name)
        targets = _public_callables(obj) if isinstance(obj, type) else [obj] if callable(obj) else []
        for target in targets:
            try:
                hints = typing.get_type_hints(target)
            except (NameError, TypeError):
                continue  # annotations naming what only a type checker imports
            for annotation in hints.values():
                for cls in _classes_in(annotation):
                    if cls.__module__.startswith("kestrel_core") and cls not in exported:
                        missing.add(f"{cls.__module__}.{cls.__qualname__} (in {name})")
    assert not missing, sorted(missing)


def test_the_engine_ships_its_types() -> None:
    assert (Path(kestrel_core.__file__).parent / "py.typed").is_file()


def test_the_worker_settings_are_exported_and_typed_as_keywords() -> None:
    """``Worker(app, WorkerSettings(...))``, or the same fields as keywords, typed by
    ``WorkerOptions`` (so a type checker sees a misspelt option in ``app.worker(...)``)."""
    assert {"WorkerSettings", "WorkerOptions"} <= set(kestrel_core.__all__)
    fields = {f.name for f in dataclasses.fields(kestrel_core.WorkerSettings)}
    assert set(typing.get_type_hints(kestrel_core.WorkerOptions)) == fields
    for method in (kestrel_core.Kestrel.worker, kestrel_core.Kestrel.run_worker):
        options = inspect.signature(method).parameters["options"]
        assert options.kind is inspect.Parameter.VAR_KEYWORD and "Unpack[WorkerOptions]" in str(options.annotation)
