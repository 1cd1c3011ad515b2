"""Options and arguments shared by commands (``--operator``, the execution ID) and the
``Settings`` the root callback stored on the context (see ``kestrel_console.settings``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from kestrel_core import NotSerializable
from kestrel_core.base import to_json

from ..settings import Settings, build_settings
from .errors import fail

T = TypeVar("T")

# Every command that acts takes --operator too (after the command name), so that
# `approve 7 gate --operator alice` works as well as `--operator alice approve 7 gate`.
OPERATOR_HELP = "Who is acting, recorded in the audit table (default: the global --operator, $KESTREL_OPERATOR, $USER)."


def unset_option(*flags: str, **settings: Any) -> Any:
    """An option that is None when not given: its --help shows no "[default: None]", as the
    command's own default (the environment, the queue's setting, ...) is what applies then."""
    return typer.Option(None, *flags, show_default=False, **settings)


def operator_option() -> Any:
    """The ``--operator`` option of an acting command."""
    return unset_option("--operator", help=OPERATOR_HELP)


def _execution_id(value: int) -> int:
    from kestrel_core.admin import check_execution_id

    try:
        return check_execution_id(value)
    except ValueError as exc:
        fail(str(exc), code=2)


def parsed(parse: Callable[[str], T], text: str, hint: str) -> T:
    """``parse(text)``; its ValueError is bad usage of ``hint`` (typer's message, exit 2)."""
    try:
        return parse(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from None


def execution_id_argument() -> Any:
    """The ID argument of a command: a positive 64-bit integer, else bad usage (exit 2)."""
    return typer.Argument(..., metavar="ID", help="Execution id.", callback=_execution_id)


def _optional_execution_id(value: int | None) -> int | None:
    return None if value is None else _execution_id(value)


def optional_execution_id_argument() -> Any:
    """The ID argument of a command that may act on many instead (``--where`` / ``--token``)."""
    return typer.Argument(
        None,
        metavar="ID",
        help="Execution id (or --where / --token for many).",
        callback=_optional_execution_id,
        show_default=False,
    )


def bulk_format_option() -> Any:
    """``--format`` of a bulk preview: table (for people) or json (the ids and the token)."""

    def check(value: str) -> str:
        if value not in ("table", "json"):
            raise typer.BadParameter(f"{value!r}: use table or json", param_hint="--format")
        return value

    return typer.Option(
        "table", "--format", "-f", callback=check, help="With --dry-run: table, or json (every id, the token)."
    )


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
        obj = build_settings(None, None, None, None)
        root.obj = obj
    return obj


def parse_json_option(text: str, option: str) -> Any:
    """The JSON value of an option, checked as the engine will store it (exit 2 if not)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(
            f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})", param_hint=option
        ) from None
    except RecursionError:
        fail(f"{option}: the JSON is nested too deeply (the limit is 500 levels)", code=2)
    except ValueError:  # an integer of more than 4,300 digits, which Python will not read
        fail(f"{option}: the JSON holds an integer of more than 4,300 digits; pass it as a string", code=2)
    try:
        to_json(value, f"{option}")
    except NotSerializable as exc:
        fail(str(exc), code=2)
    return value
