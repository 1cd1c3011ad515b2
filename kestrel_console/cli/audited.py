"""What the commands that act by name or id share: the ``--comment`` option, and one audited
call of the Kestrel API as the operator, its database errors turned into one line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from ..safe_text import visible
from .errors import handles_errors
from .options import acting, operator_option, unset_option


def comment_option() -> Any:
    return unset_option("--comment", help="Why (kept in the audit table).")


def act(ctx: typer.Context, operator: str | None, action: str, *args: Any, comment: str | None) -> tuple[Any, str]:
    """``Kestrel.<action>(*args, by=operator, comment=comment)``: what it returned, and who
    acted (printable)."""
    s = acting(ctx, operator)
    with s.kestrel() as app:
        result = handles_errors(getattr(app, action))(*args, by=s.operator, comment=comment)
    return result, visible(s.operator)


def by_name_command(
    group: typer.Typer, noun: str, verb: str, say: Callable[[str, Any, str], None], doc: str
) -> Callable[..., None]:
    """Command ``verb`` of ``group``, acting on one ``noun`` (a queue, a schedule) by its NAME:
    calls ``Kestrel.<verb>_<noun>(name, by=..., comment=...)``, then ``say(name, what it
    returned, who acted)``."""
    action = f"{verb}_{noun}"

    def command(
        ctx: typer.Context,
        name: str = typer.Argument(..., metavar="NAME", help=f"{noun.capitalize()} name."),
        comment: str | None = comment_option(),
        operator: str | None = operator_option(),
    ) -> None:
        result, who = act(ctx, operator, action, name, comment=comment)
        say(name, result, who)

    command.__name__ = command.__qualname__ = verb
    command.__doc__ = doc
    return group.command(verb)(command)
