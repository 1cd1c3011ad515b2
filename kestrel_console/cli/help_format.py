"""``--help`` that reads well: a flag shows no ``<bool>`` value (it takes none), and a
command's one-line summary in the commands list is its docstring's first paragraph joined into
one sentence (Typer kept the docstring's line breaks there, cutting sentences mid-way)."""

from __future__ import annotations

import inspect
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup


class _FlagsTakeNoValue:
    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""  # shown as the value's type: a flag has none
        return params


class KestrelCommand(_FlagsTakeNoValue, TyperCommand):
    pass


class KestrelGroup(_FlagsTakeNoValue, TyperGroup):
    pass


def summary(doc: str | None) -> str | None:
    """A docstring's first paragraph on one line."""
    if not doc:
        return None
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def tidy_help(app: typer.Typer) -> None:
    """Apply both to every command and group of ``app`` (before Click builds them)."""
    if not _ours(app.info.cls, KestrelGroup):
        app.info.cls = KestrelGroup
    for info in app.registered_commands:
        if not _ours(info.cls, KestrelCommand):
            info.cls = KestrelCommand
        if info.short_help is None and info.help is None:
            info.short_help = summary(info.callback.__doc__ if info.callback else None)
    for group in app.registered_groups:
        if not _ours(group.cls, KestrelGroup):
            group.cls = KestrelGroup
        if group.typer_instance is not None:
            tidy_help(group.typer_instance)


def _ours(cls: Any, wanted: type) -> bool:
    """Whether ``cls`` (maybe Typer's default placeholder) is already ``wanted`` or a subclass."""
    return isinstance(cls, type) and issubclass(cls, wanted)
