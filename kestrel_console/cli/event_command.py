"""``kestrel-console send-event KEY [--payload JSON]``: a machine signal from the shell.

Goes through ``Kestrel.send_event`` (the schema's ``send_event`` function); the event row
itself records who sent it (``sent_by``, the operator) and when.
"""

from __future__ import annotations

import typer

from .errors import handles_errors
from .options import acting, operator_option, parse_json_option, unset_option


def send_event(
    ctx: typer.Context,
    key: str = typer.Argument(..., help="Event key, e.g. payment:A-17."),
    payload: str | None = unset_option("--payload", help="Payload as JSON (default null)."),
    operator: str | None = operator_option(),
) -> None:
    """Send event KEY: every execution waiting for it (ctx.wait_for_event) resumes."""
    if not key.strip():
        raise typer.BadParameter("an event key must not be empty", param_hint="KEY")
    value = parse_json_option(payload, "--payload") if payload is not None else None
    s = acting(ctx, operator)
    with s.kestrel() as app:
        event_id = handles_errors(app.send_event)(key, value, by=s.operator)
    typer.echo(f"sent event {event_id} ({key})")


def register(app: typer.Typer) -> None:
    app.command("send-event")(send_event)
