"""Saved reports and ad-hoc SQL: ``report`` and ``sql``. Both run through the read-only guard
(``adhoc.run_read_only``, three layers) on ``--reader-dsn`` when given; notes go to stderr,
results to stdout in ``--format table|json|csv``.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from .. import render
from ..settings import DEFAULT_MAX_BYTES, Settings
from .errors import fail, handles_errors
from .options import settings, unset_option
from .read_commands import REPORT_LIST_COLUMNS
from .read_session import CLI_TIMEOUT_MS, DEFAULT_MAX_ROWS, check_max_rows, format_option, note, open_connection

# -- report ----------------------------------------------------------------------------------


def _parse_params(values: list[str]) -> dict[str, str]:
    given: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            fail(f"bad --param {item!r}: write it as KEY=VALUE (for example --param since='2 days')")
        if key in given:
            fail(f"--param {key} is given twice")
        given[key] = value
    return given


def _report_listing(reports: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for report in reports.values():
        rows.append(
            {
                "name": report.name,
                "description": report.description,
                "params": [{"name": p.name, "type": p.type, "default": p.default_text} for p in report.params],
                "path": str(report.path),
                "shipped": report.shipped,
                "overrides": [str(p) for p in report.overrides],
            }
        )
    return rows


def _params_text(params: list[dict[str, Any]]) -> str:
    return ", ".join(
        p["name"] + " " + p["type"] + ("" if p["default"] is None else f" = {p['default']}") for p in params
    )


def _run_report(
    s: Settings, name: str, given: dict[str, str], max_rows: int, timeout_s: float, max_bytes: int
) -> tuple[Any, Any]:
    from ..reports import bind_params, find_report, run_report

    limits = _limits(s, max_rows, timeout_s, max_bytes)
    report = find_report(name, s.queries)
    values = bind_params(report, given)
    with open_connection(s) as conn:
        result = run_report(conn, report, values, **limits)
    return report, result


def _limits(s: Settings, max_rows: int, timeout_s: float, max_bytes: int) -> dict[str, Any]:
    """The bounds a query or report of the command line runs under (keywords of
    ``run_read_only`` and ``run_report``), checked before anything connects."""
    return {
        "schema": s.schema,
        "timeout_ms": _timeout_ms(timeout_s),
        "max_rows": max_rows,
        "max_bytes": max_bytes,
        "allow_privileged": s.allow_privileged_sql,
    }


def _timeout_ms(seconds: float) -> int:
    """--timeout in whole milliseconds; below 1 ms (which Postgres would read as "no timeout"),
    not a number, or beyond ten minutes is bad usage."""
    from ..adhoc import timeout_ms

    try:
        return timeout_ms(seconds)
    except ValueError as exc:
        fail(f"--timeout {seconds:g}: {str(exc).split(': ', 1)[-1]}", code=2)


def max_rows_option() -> Any:
    """``--max-rows`` of a command that runs a query (report, sql)."""
    return typer.Option(DEFAULT_MAX_ROWS, "--max-rows", callback=check_max_rows, help="Print at most this many rows.")


def timeout_option() -> Any:
    """``--timeout`` of a command that runs a query (report, sql)."""
    return typer.Option(CLI_TIMEOUT_MS / 1000, "--timeout", min=0.1, help="Seconds before the query is cancelled.")


def max_bytes_option() -> Any:
    return typer.Option(
        DEFAULT_MAX_BYTES,
        "--max-bytes",
        min=1,
        max=2**62,
        help="Cut the result once its values hold this many bytes (as text).",
    )


def _result_notes(result: Any, max_rows: int) -> None:
    """Why the result may be incomplete, and what the reader role could not promise (stderr)."""
    if result.notice:
        note(result.notice)
    if result.cut_at_bytes:
        note(
            f"result cut at {_megabytes(result.cut_at_bytes)} ({len(result.rows)} rows): "
            "narrow the query or raise --max-bytes"
        )
    elif result.truncated:
        note(f"only the first {max_rows} rows are shown: raise --max-rows to see more")


def _megabytes(count: int) -> str:
    return f"{count / 1024 / 1024:g} MB" if count >= 1024 * 1024 else f"{count} bytes"


def report(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, metavar="[NAME]", help="Report to run; none: list them."),
    param: list[str] | None = unset_option(
        "--param", "-p", metavar="KEY=VALUE", help="A report parameter (repeatable)."
    ),
    max_rows: int = max_rows_option(),
    timeout: float = timeout_option(),
    max_bytes: int = max_bytes_option(),
    fmt: str = format_option(),
) -> None:
    """List the saved reports, or run report NAME (says on stderr which file it ran)."""
    from ..reports import discover

    s = settings(ctx)
    if name is None:
        if param:
            fail("--param needs a report NAME: kestrel-console report NAME --param KEY=VALUE", code=2)
        rows = _report_listing(handles_errors(discover)(s.queries))
        if fmt == "table":
            table_rows = [
                {
                    **r,
                    "params": _params_text(r["params"]),
                    "path": "shipped"
                    if r["shipped"]
                    else r["path"] + (" (overrides the shipped one)" if r["overrides"] else ""),
                }
                for r in rows
            ]
            render.emit(
                table_rows, ["name", "description", "params", "path"], "table", empty="no reports found", max_cell=400
            )
        else:
            render.emit(rows, REPORT_LIST_COLUMNS, fmt)
        return
    given = _parse_params(param or [])
    ran, result = handles_errors(_run_report)(s, name, given, max_rows, timeout, max_bytes)
    origin = "shipped" if ran.shipped else "user"
    note(f"report {ran.name}: ran {ran.path} ({origin}); {len(result.rows)} row(s) in {result.elapsed_ms:.0f} ms")
    _result_notes(result, max_rows)
    render.emit(result.rows, result.columns, fmt)


# -- sql -------------------------------------------------------------------------------------


def _run_sql(s: Settings, query: str, max_rows: int, timeout_s: float, max_bytes: int) -> Any:
    from ..adhoc import run_read_only

    limits = _limits(s, max_rows, timeout_s, max_bytes)
    with open_connection(s) as conn:
        return run_read_only(conn, query, **limits)


def sql(
    ctx: typer.Context,
    query: str = typer.Argument(
        ..., metavar="QUERY", help="One read-only statement (SELECT, WITH, VALUES, EXPLAIN); '-' reads it from stdin."
    ),
    max_rows: int = max_rows_option(),
    timeout: float = timeout_option(),
    max_bytes: int = max_bytes_option(),
    fmt: str = format_option(),
) -> None:
    """Run one read-only query (search_path is the Kestrel schema); anything that could write
    is refused with the reason."""
    s = settings(ctx)
    if query == "-":
        query = sys.stdin.read()
    if not query.strip():
        fail("the query is empty", code=2)
    result = handles_errors(_run_sql)(s, query, max_rows, timeout, max_bytes)
    if fmt == "table":
        note(f"{len(result.rows)} row(s) in {result.elapsed_ms:.0f} ms")
    _result_notes(result, max_rows)
    render.emit(result.rows, result.columns, fmt)


def register(app: typer.Typer) -> None:
    app.command()(report)
    app.command()(sql)
