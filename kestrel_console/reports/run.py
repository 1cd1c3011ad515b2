"""Binding a report's parameters and running it read-only (through ``adhoc.run_read_only``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model import Report, ReportError
from .values import convert_value, wrong_type_message


def describe_params(report: Report) -> str:
    """``since (interval, default '1 month'), limit (integer, required)``."""
    if not report.params:
        return "it takes no parameters"
    parts = [f"{p.name} ({p.type}, " + ("required)" if p.required else f"default {p.default})") for p in report.params]
    return "its parameters: " + ", ".join(parts)


def bind_params(report: Report, given: Mapping[str, str]) -> dict[str, Any]:
    """The values to bind: each given text converted to its type, defaults filled in."""
    for key in given:
        if report.param(key) is None:
            raise ReportError(f"report {report.name!r} has no parameter {key!r}; {describe_params(report)}")
    values: dict[str, Any] = {}
    for param in report.params:
        if param.name in given:
            text = given[param.name]
            values[param.name] = convert_value(report.name, param, None if text is None else str(text))
        elif param.required:
            raise ReportError(
                f"report {report.name!r} needs parameter {param.name!r} ({param.type}): "
                f"give it as --param {param.name}=VALUE"
            )
        else:
            values[param.name] = convert_value(report.name, param, param.default_text)
    return values


# Postgres refused to cast a value: invalid text representation, datetime format or range.
_CAST_SQLSTATES = {"22P02", "22007", "22008", "22015", "22003"}


def run_report(
    conn: Any,
    report: Report,
    params: Mapping[str, Any],
    *,
    schema: str = "kestrel",
    timeout_ms: float = 10_000,
    max_rows: int = 1000,
    max_bytes: int | None = None,
    allow_privileged: bool = False,
) -> Any:
    """Run the report read-only (``adhoc.run_read_only``) with its bound parameters.

    On a superuser (BYPASSRLS, CREATEROLE) login, shipped reports run (they are the package's
    code, reviewed with it); a report from a user folder is refused as ad-hoc SQL is, unless
    ``allow_privileged``.

    ``params`` come from ``bind_params``. A value Postgres cannot cast to the parameter's type
    raises ReportError naming the parameter; other failures propagate (QueryRefused,
    QueryTimeout, QueryFailed).
    """
    from ..adhoc import DEFAULT_MAX_BYTES, QueryFailed, run_read_only

    missing = [p.name for p in report.params if p.name not in params]
    if missing:
        raise ReportError(f"report {report.name!r}: no value bound for {', '.join(missing)} (use bind_params)")
    try:
        return run_read_only(
            conn,
            report.sql,
            dict(params),
            schema=schema,
            timeout_ms=timeout_ms,
            max_rows=max_rows,
            max_bytes=max_bytes or DEFAULT_MAX_BYTES,
            check=True,
            placeholders=True,
            allow_privileged=allow_privileged or report.shipped,
        )
    except QueryFailed as exc:
        bad = _cast_failure(report, params, exc)
        if bad is not None:
            raise bad from None
        raise


def _cast_failure(report: Report, params: Mapping[str, Any], exc: BaseException) -> ReportError | None:
    """The parameter whose value Postgres could not cast, if that is what failed."""
    cause = exc.__cause__ or exc.__context__
    sqlstate = getattr(cause, "sqlstate", None) or getattr(exc, "sqlstate", None)
    if sqlstate not in _CAST_SQLSTATES:
        return None
    message = str(cause or exc)
    for param in report.params:
        value = params.get(param.name)
        if isinstance(value, str) and f'"{value}"' in message:
            return ReportError(wrong_type_message(report.name, param, value))
    return None
