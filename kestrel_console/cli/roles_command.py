"""The ``roles`` command: create the least-privilege roles for workers and operators, or update their grants."""

from __future__ import annotations

import typer

from kestrel_core.db import (
    DEFAULT_OPERATOR_ROLE,
    DEFAULT_WORKER_ROLE,
    RoleNames,
    RolesReport,
    connect,
    describe_target,
    ensure_roles,
)

from .errors import fail, handles_errors
from .options import settings


def roles(
    ctx: typer.Context,
    worker_role: str = typer.Option(DEFAULT_WORKER_ROLE, "--worker-role", help="Name of the worker role."),
    operator_role: str = typer.Option(DEFAULT_OPERATOR_ROLE, "--operator-role", help="Name of the operator role."),
) -> None:
    """Create the NOLOGIN roles for workers and operators, or update their grants.

    Grant them to login users, e.g. GRANT kestrel_operator TO alice. Needs a user that may
    create roles and owns the schema; run it again after each upgrade (migrate does)."""
    s = settings(ctx)
    try:
        names = RoleNames(worker=worker_role, operator=operator_role)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--worker-role / --operator-role") from None

    def apply() -> RolesReport:
        with connect(s.dsn, application_name="kestrel-console") as conn:
            try:
                return ensure_roles(conn, s.schema, names)
            except ValueError as exc:
                fail(str(exc))

    report = handles_errors(apply)()
    target = describe_target(s.dsn)
    for role in report.created:
        typer.echo(f"created role {role} on {target}")
    for role in report.existing:
        typer.echo(f"role {role} exists on {target}: grants updated")
    typer.echo(
        f"grants on schema {s.schema!r} applied; grant the roles to login users, e.g. GRANT {names.operator} TO alice"
    )


def register(app: typer.Typer) -> None:
    app.command()(roles)
