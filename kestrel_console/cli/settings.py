"""Global options shared by every command (``--dsn``, ``--schema``, ``--operator``, ...)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from kestrel_core import Kestrel
from kestrel_core.app import default_operator
from kestrel_core.connection import resolve_dsn


@dataclass
class Settings:
    dsn: str = ""
    schema: str = "kestrel"
    operator: str = field(default_factory=default_operator)
    queries: list[Path] = field(default_factory=list)
    dsn_given: bool = False  # --dsn or $KESTREL_DSN was set (the demo starts its own server if not)

    def kestrel(self) -> Kestrel:
        """A Kestrel app for this DSN and schema (the caller closes it)."""
        return Kestrel(self.dsn, schema=self.schema, application_name="kestrel-console")


def default_acting_operator() -> str:
    """Who acts when no ``--operator`` is given: ``$KESTREL_OPERATOR``, else ``$USER``."""
    return os.environ.get("KESTREL_OPERATOR") or default_operator()


def build_settings(dsn: str | None, schema: str, operator: str | None, queries: list[Path] | None) -> Settings:
    dirs = list(queries or [])
    env_dirs = os.environ.get("KESTREL_QUERIES")
    if env_dirs:
        dirs.extend(Path(p) for p in env_dirs.split(os.pathsep) if p)
    return Settings(
        dsn=resolve_dsn(dsn),
        schema=schema,
        operator=operator or default_acting_operator(),
        queries=dirs,
        dsn_given=dsn is not None or "KESTREL_DSN" in os.environ,
    )


# Every command that acts takes --operator too (after the command name), so that
# `approve 7 gate --operator alice` works as well as `--operator alice approve 7 gate`.
OPERATOR_HELP = "Who is acting, recorded in the audit table (default: the global --operator, $KESTREL_OPERATOR, $USER)."


def operator_option() -> Any:
    """The ``--operator`` option of an acting command."""
    return typer.Option(None, "--operator", help=OPERATOR_HELP, show_default=False)


def _execution_id(value: int) -> int:
    from kestrel_core.operator import check_execution_id

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
