"""Every error class the console defines is one it raises (or the base of one it raises)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import kestrel_console
from tests.core.test_errors_raised import unraised


def test_every_console_error_is_raised_somewhere():
    errors: set[type[BaseException]] = set()
    for info in pkgutil.walk_packages(kestrel_console.__path__, "kestrel_console."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        errors.update(
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__.startswith("kestrel_console.")
        )
    assert len(errors) >= 8
    assert unraised(sorted(errors, key=lambda e: e.__name__), Path(kestrel_console.__file__).parent) == []
