"""``kestrel-console demo``: see Kestrel working without setting up anything."""

from __future__ import annotations

from typing import Optional

import typer

from .errors import handles_errors
from .settings import settings


def demo(
    ctx: typer.Context,
    no_tui: bool = typer.Option(False, "--no-tui", help="Run headless: print the DSN, events and a summary."),
    workers: int = typer.Option(2, "--workers", min=1, max=16, help="Demo workers to run (threads in this process)."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, max=64, help="Executions each worker runs at once."),
    rate: float = typer.Option(30.0, "--rate", min=0.0, max=6000.0, metavar="PER_MIN",
                               help="New workflows enqueued per minute after the seed burst (0: none)."),
    duration: Optional[float] = typer.Option(None, "--duration", min=0.1, metavar="SECONDS",
                                             help="Stop after this long (headless; default: until Ctrl-C).",
                                             show_default=False),
    no_seed: bool = typer.Option(False, "--no-seed", help="Do not enqueue the burst of quick workflows at start."),
) -> None:
    """Run demo workflows and workers, then open the TUI on them.

    With no --dsn or $KESTREL_DSN: a private PostgreSQL in $KESTREL_DEMO_DIR
    (default ~/.local/share/kestrel/demo-pg), kept for the next run, stopped on exit.

    Workflows: incident remediation with an approval gate (critical incidents
    wait for you; a bot decides the others), provisioning with a durable sleep
    and a flaky step that retries, a CI pipeline that sometimes fails.
    """
    from kestrel_console.demo.runner import DemoOptions, run_demo

    options = DemoOptions(tui=not no_tui, workers=workers, concurrency=concurrency,
                          rate_per_min=rate, duration=duration, seed_history=not no_seed)
    handles_errors(run_demo)(settings(ctx), options)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
