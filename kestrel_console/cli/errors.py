"""How commands fail: a one-paragraph message on stderr and exit status 1, never a traceback."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import psycopg
import typer

from kestrel_core import InvalidArgument, KestrelError, mask_dsn

from ..safe_text import visible
from .supervision import supervised_failed

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` on stderr (passwords masked, control characters escaped) and
    exit with ``code``; under a supervisor, tell it instead (it prints the message)."""
    text = visible(mask_dsn(message), newlines=True)
    if not supervised_failed(text):  # a worker process of `worker --processes N` tells its supervisor
        typer.echo(f"error: {text}", err=True)
    raise typer.Exit(code)


def handles_errors(fn: F) -> F:
    """Turn Kestrel and database errors raised by a command into ``fail``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InvalidArgument as exc:  # a value no call could accept: bad usage
            fail(str(exc), code=2)
        except KestrelError as exc:
            fail(str(exc))
        except psycopg.OperationalError as exc:
            fail(f"database error: {str(exc).strip()}")
        except psycopg.Error as exc:
            diag = getattr(exc, "diag", None)
            detail = diag.message_primary if diag is not None and diag.message_primary else str(exc)
            fail(f"database error: {detail.strip()}")
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]
