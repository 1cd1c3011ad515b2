"""Options and arguments shared by commands (``--operator``, the execution ID) and the
``Settings`` the root callback stored on the context (see ``kestrel_console.settings``)."""

from __future__ import annotations

from typing import Any

import typer

from ..settings import Settings, build_settings

# Every command that acts takes --operator too (after the command name), so that
# `approve 7 gate --operator alice` works as well as `--operator alice approve 7 gate`.
OPERATOR_HELP = "Who is acting, recorded in the audit table (default: the global --operator, $KESTREL_OPERATOR, $USER)."


def operator_option() -> Any:
    """The ``--operator`` option of an acting command."""
    return typer.Option(None, "--operator", help=OPERATOR_HELP, show_default=False)


def _execution_id(value: int) -> int:
    from kestrel_core.admin import check_execution_id

    try:
        return check_execution_id(value)
    except ValueError as exc:
        from .errors import fail

        fail(str(exc), code=2)


def execution_id_argument() -> Any:
    """The ID argument of a command: a positive 64-bit integer, else bad usage (exit 2)."""
    return typer.Argument(..., metavar="ID", help="Execution id.", callback=_execution_id)


def acting(ctx: typer.Context, operator: str | None) -> Settings:
    """The settings with the acting operator of this command: its own --operator wins."""
    s = settings(ctx)
    if operator is not None:
        if not operator.strip():
            raise typer.BadParameter("give a name (who is acting is the audit's point)", param_hint="--operator")
        s.operator = operator
    return s


def settings(ctx: typer.Context) -> Settings:
    """The Settings the root callback stored on the context."""
    root = ctx.find_root()
    obj = root.obj
    if not isinstance(obj, Settings):  # invoked without the callback (tests calling directly)
        obj = build_settings(None, "kestrel", None, None)
        root.obj = obj
    return obj
