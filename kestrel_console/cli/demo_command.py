"""``kestrel-console demo``: see Kestrel working without setting up anything."""

from __future__ import annotations

import typer

from .errors import handles_errors
from .options import settings, unset_option

HELP = """Run demo workflows and workers, then open the TUI on them.

With no --dsn or $KESTREL_DSN: a private PostgreSQL whose data is in {data_dir}
($KESTREL_DEMO_DIR sets it), kept for the next run (--fresh empties it), stopped on exit.
A second demo started meanwhile says so and attaches to the first one's server.

Workflows: incident remediation with an approval gate, provisioning with a durable sleep
and a flaky step that retries, a CI pipeline that sometimes fails. A bot operator
(demo-bot) decides non-critical approvals about 4 s after they open; critical ones wait
for you. --no-bot leaves every approval to you.
"""


def demo(
    ctx: typer.Context,
    no_tui: bool = typer.Option(False, "--no-tui", help="Run headless: print the DSN, events and a summary."),
    workers: int = typer.Option(2, "--workers", min=1, max=16, help="Demo workers to run (threads in this process)."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, max=64, help="Executions each worker runs at once."),
    rate: float = typer.Option(
        30.0,
        "--rate",
        min=0.0,
        max=6000.0,
        metavar="PER_MIN",
        help="New workflows enqueued per minute after the seed burst (0: none).",
    ),
    duration: float | None = unset_option(
        "--duration", min=0.1, metavar="SECONDS", help="Stop after this long (headless; default: until Ctrl-C)."
    ),
    no_seed: bool = typer.Option(False, "--no-seed", help="Do not enqueue the burst of quick workflows at start."),
    fresh: bool = typer.Option(
        False,
        "--fresh",
        help="Start from empty: drop and recreate the demo's database "
        "(with --dsn: its --schema) and every execution, approval and worker in it.",
    ),
    no_bot: bool = typer.Option(False, "--no-bot", help="No bot operator: every approval waits for you."),
) -> None:
    from kestrel_console.demo.runner import DemoOptions, run_demo

    options = DemoOptions(
        tui=not no_tui,
        workers=workers,
        concurrency=concurrency,
        rate_per_min=rate,
        duration=duration,
        seed_history=not no_seed,
        fresh=fresh,
        bot=not no_bot,
    )
    handles_errors(run_demo)(settings(ctx), options)


def register(app: typer.Typer) -> None:
    from kestrel_console.embedded_pg.account import default_data_dir

    # The folder named is the one this run would use (as root too), not a generic default.
    app.command("demo", help=HELP.format(data_dir=default_data_dir()))(demo)
