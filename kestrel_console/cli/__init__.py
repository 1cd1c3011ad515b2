"""The ``kestrel-console`` command: global options, then one module per group of commands.

Exit status: 0 success, 1 refused or failed action (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

import typer
import typer.main

from kestrel_core import mask_dsn

from ..settings import DEFAULT_MAX_LAG, build_settings
from . import (
    audit_command,
    bulk_commands,
    demo_command,
    engine_commands,
    event_command,
    metrics_command,
    prune_command,
    query_commands,
    queue_commands,
    read_commands,
    roles_command,
    schedule_commands,
)
from .help_format import tidy_help
from .options import unset_option

app = typer.Typer(
    name="kestrel-console",
    help="Operate Kestrel durable workflows: run workers, inspect executions, approve, "
    "re-enqueue, cancel, fork, pause or resume executions, pause or resume queues, run saved "
    "SQL reports. With no command, opens the TUI.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    dsn: str | None = unset_option(
        "--dsn", help="PostgreSQL DSN (else $KESTREL_DSN, else libpq defaults: PGHOST, ...)."
    ),
    schema: str | None = unset_option("--schema", help="Schema holding Kestrel's tables [default: kestrel]."),
    operator: str | None = unset_option(
        "--operator",
        help="Who is acting, recorded in the audit table (default $KESTREL_OPERATOR, then $USER); "
        "acting commands also take it after their name.",
    ),
    queries: list[Path] | None = unset_option(
        "--queries", help="Extra folder of saved reports (repeatable; also $KESTREL_QUERIES)."
    ),
    read_only: bool = typer.Option(False, "--read-only", help="TUI: hide and refuse every action."),
    reader_dsn: str | None = unset_option(
        "--reader-dsn",
        help="A read-only login for ad-hoc SQL and reports (also $KESTREL_READER_DSN); "
        "needed when the console's login is a superuser.",
    ),
    allow_privileged_sql: bool = typer.Option(
        False,
        "--allow-privileged-sql",
        help="Run ad-hoc SQL and user reports on a superuser (BYPASSRLS, "
        "CREATEROLE) login anyway; marked on every result. Prefer --reader-dsn.",
    ),
    read_dsn: str | None = unset_option(
        "--read-dsn",
        help="Where the console reads (also $KESTREL_READ_DSN), e.g. a streaming replica: the TUI's "
        "screens, status, list, show, metrics, and sql and report unless --reader-dsn is given. "
        "Every action still goes to --dsn.",
    ),
    max_lag: float = typer.Option(
        DEFAULT_MAX_LAG,
        "--max-lag",
        min=0,
        metavar="SECONDS",
        help="TUI: a banner while the --read-dsn replica is more than this many seconds behind.",
    ),
) -> None:
    from kestrel_core.db import check_schema_name

    try:
        if schema is not None:  # None: not given (a worker's app keeps its own schema)
            check_schema_name(schema)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--schema") from None
    ctx.obj = build_settings(dsn, schema, operator, queries, reader_dsn, allow_privileged_sql, read_dsn, max_lag)
    if ctx.invoked_subcommand is None:
        from .tui_command import open_tui

        open_tui(ctx.obj, read_only=read_only)


for _commands in (
    engine_commands,
    read_commands,
    query_commands,
    prune_command,
    roles_command,
    demo_command,
    queue_commands,
    schedule_commands,
    event_command,
    metrics_command,
    bulk_commands,
    audit_command,
):
    _commands.register(app)
tidy_help(app)


def not_utf8(args: list[str], environ: dict[str, str]) -> str | None:
    """What is not valid UTF-8 among the arguments, $KESTREL_OPERATOR and the DSNs (Python
    keeps such bytes as lone surrogates, which Postgres text cannot hold), spelled with its
    bytes and any password masked (the value may be a DSN); else None."""
    named = [("argument", arg) for arg in args]
    for variable in ("KESTREL_OPERATOR", "KESTREL_DSN", "KESTREL_READ_DSN"):
        if variable in environ:
            named.append((f"${variable}", environ[variable]))
    for label, text in named:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return f"{label} '{mask_dsn(os.fsencode(text).decode('utf-8', 'backslashreplace'))}' is not valid UTF-8"
    return None


@functools.cache
def command() -> Any:
    """The command line Typer builds from ``app``, built once. ``app()`` builds it anew at every
    call (28 ms of reading signatures and type hints): a process that runs ``main`` more than
    once, as the tests do in process, paid that at every call."""
    return typer.main.get_command(app)


def main() -> None:
    """Console-script entry point. Arguments that are not valid UTF-8 are refused first (exit
    2): they would reach the database only to fail there with a traceback."""
    problem = not_utf8(sys.argv[1:], dict(os.environ))
    if problem:
        print(f"error: {problem}: Postgres text is UTF-8; check the terminal's encoding (locale)", file=sys.stderr)
        sys.exit(2)
    command()()  # what app() does (its pretty exceptions are off)
