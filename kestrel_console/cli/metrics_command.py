"""``kestrel-console metrics [--listen HOST:PORT]``: the Prometheus/OpenMetrics endpoint, in the
foreground until SIGINT or SIGTERM (kestrel_console.metrics; docs/metrics.md)."""

from __future__ import annotations

import signal
import threading
from typing import Any

import typer

from kestrel_core.db import describe_target

from ..metrics.defaults import DEFAULT_LISTEN, DEFAULT_TIMEOUT_S, SETTLE_S
from .errors import fail
from .options import settings


def metrics(
    ctx: typer.Context,
    listen: str = typer.Option(
        DEFAULT_LISTEN, "--listen", help="HOST:PORT to serve /metrics on ([::1]:PORT for IPv6; port 0: any free one)."
    ),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT_S, "--timeout", help="Seconds each scrape's database reads may take (statement_timeout)."
    ),
    settle: float = typer.Option(
        SETTLE_S,
        "--settle",
        help="Seconds a finished execution or step waits before the counters count it "
        "(its transaction has committed by then).",
    ),
) -> None:
    """Serve Prometheus metrics: queue depth and age, running against limits, stuck leases,
    pending approvals, finished executions, step durations, workers, and the saved reports
    that declare a metric. Reads on --reader-dsn when given. Runs until Ctrl-C."""
    if not 0 < timeout <= 600:
        fail(f"--timeout {timeout}: give seconds from 0 to 600", code=2)
    if not 0 <= settle <= 3600:
        fail(f"--settle {settle}: give seconds from 0 to 3600", code=2)
    from ..metrics.server import BadListen, serve

    s = settings(ctx)
    try:
        endpoint = serve(s, listen, timeout_s=timeout, settle_s=settle)
    except BadListen as exc:
        fail(str(exc), code=2)
    except OSError as exc:
        fail(f"cannot listen on {listen}: {exc.strerror or exc}")
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        typer.echo(
            f"serving metrics on {endpoint.url} "
            f"(reading {describe_target(s.read_dsn or s.adhoc_dsn)}, schema {s.schema})",
            err=True,
        )
        try:
            endpoint.reader.operations()
        except Exception as exc:  # keep serving: the scrapes say kestrel_up 0 until it works
            typer.echo(f"warning: cannot read the database yet: {str(exc).strip()}", err=True)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        endpoint.close()
    typer.echo("metrics endpoint stopped", err=True)


def register(app: typer.Typer) -> None:
    app.command("metrics")(metrics)
