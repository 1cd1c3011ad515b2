"""``kestrel-console worker``: one worker process, or N of them under a supervisor.

With ``--processes 1`` the worker runs in this process (its pid is the command's). Above 1 this
process checks what it can (the module, its workflows, the options), then supervises N copies
of the same command line with ``--processes 1 [--worker-id ID-i]``, each registering its own
``workers`` row; the supervising is ``supervision``'s job (this package).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import math
import signal
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import typer

from kestrel_core import Kestrel
from kestrel_core.admin import parse_age
from kestrel_core.engine import STOP_SIGNALS

from ..settings import Settings
from .errors import fail, handles_errors
from .options import settings, unset_option
from .supervision import Supervisor, default_processes, supervised_adopt, supervised_ready

PROCESSES_HELP = (
    "Worker processes to run, each with its own `workers` row and --concurrency slots "
    f"(default: one per core, {default_processes()} here). Above 1, this process supervises them: restarts "
    "one that dies, passes SIGINT/SIGTERM on, stops them all and exits 1 if they cannot start."
)


def load_app(target: str) -> Kestrel:
    """Import ``MODULE[:ATTR]`` (ATTR defaults to ``app``) and return the Kestrel found there."""
    module_name, _, attr = target.partition(":")
    attr = attr or "app"
    if not all(part.isidentifier() for part in module_name.split(".")) or not attr.isidentifier():
        fail(
            f"{target!r} is not MODULE[:ATTR]: give a dotted Python module name (no path, no '.py'), "
            "e.g. remediate_app or myproject.workflows:app",
            code=2,
        )
    if "." not in sys.path and "" not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: modules in the current folder are found
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            fail(
                f"cannot import module {module_name!r}: no such module "
                "(run from the folder that holds it, or fix PYTHONPATH)"
            )
        raise
    obj = getattr(module, attr, None)
    if obj is None:
        fail(f"module {module_name!r} has no attribute {attr!r}: name it as MODULE:ATTR")
    if not isinstance(obj, Kestrel):
        fail(f"{module_name}:{attr} is a {type(obj).__name__}, not a kestrel_core.Kestrel app")
    return obj


MAX_LEASE_S = 86400.0  # a day: a longer lease would leave a dead worker's executions stuck for longer


def _lease(value: float) -> float:
    """--lease as a number of seconds from 1 to a day (inf and nan are no lease length)."""
    if not math.isfinite(value) or not 1.0 <= value <= MAX_LEASE_S:
        fail(f"--lease {value:g}: give a number of seconds from 1 to {MAX_LEASE_S:g}", code=2)
    return value


def worker(
    ctx: typer.Context,
    target: str = typer.Argument(
        ..., metavar="MODULE[:ATTR]", help="Where the Kestrel app is (ATTR defaults to 'app')."
    ),
    concurrency: int = typer.Option(
        8, "--concurrency", min=1, max=1024, help="Executions run at once (by each process)."
    ),
    lease: float = typer.Option(
        30.0, "--lease", callback=_lease, help="Lease length in seconds (1 to 86400); renewed every third of it."
    ),
    worker_id: str | None = unset_option(
        "--worker-id",
        help="Owner id written on claimed rows (default host:pid:random; with --processes N: ID-1 .. ID-N).",
    ),
    no_listen: bool = typer.Option(False, "--no-listen", help="Poll only, no LISTEN/NOTIFY."),
    transaction_pooling: bool = typer.Option(
        False,
        "--transaction-pooling",
        help=(
            "The DSN goes through PgBouncer in transaction mode: no LISTEN (poll), no server-side prepared statements."
        ),
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
    startup_timeout: float = typer.Option(
        60.0,
        "--startup-timeout",
        min=0.0,
        metavar="SECONDS",
        help="How long to wait for an unreachable database at startup (retrying, logging each try) before exiting 1.",
    ),
    prune_older_than: str | None = unset_option(
        "--prune-older-than",
        metavar="AGE",
        help="Also delete executions finished more than AGE ago (30d, 12h, ...), every 10 minutes.",
    ),
    queues: str | None = unset_option(
        "--queues", metavar="A,B", help="Claim only from these queues (comma-separated; default: every queue)."
    ),
    buckets: int | None = unset_option(
        "--buckets",
        min=1,
        max=64,
        metavar="N",
        help="Serve a share of N bucket groups with the other workers started with --buckets N "
        "(rebalanced as workers come and go); default: claim from every bucket.",
    ),
    processes: int | None = unset_option("--processes", min=1, max=256, metavar="N", help=PROCESSES_HELP),
    metrics_listen: str | None = unset_option(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="Also serve Prometheus metrics there, as `kestrel-console metrics` does (with "
        "--processes N, from the supervising process only).",
    ),
) -> None:
    """Run a worker for the workflows registered on the app at MODULE[:ATTR], until SIGINT/SIGTERM.

    Logs one line per event (claimed, finished, parked, write_refused, ...) with key=value
    fields on stderr. SIGINT/SIGTERM: stop claiming, let running steps finish (up to the lease),
    hand back what did not finish; a second signal stops waiting. One Python process uses one
    core: --processes (default one per core) runs that many, supervised by this one.
    """
    under_supervisor = supervised_adopt()  # a child of `--processes N`: report ready or why not
    level = logging.getLevelName(log_level.upper())
    if not isinstance(level, int):
        raise typer.BadParameter("use debug, info, warning or error", param_hint="--log-level")
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    retention = None
    if prune_older_than is not None:
        try:
            retention = parse_age(prune_older_than)
        except ValueError as exc:
            fail(f"--prune-older-than: {exc}", code=2)
    s = settings(ctx)
    # The command line's --dsn/--schema/--transaction-pooling win over what the module
    # configured: on an app of the worker's own (the module's is left as it was built).
    user_app = load_app(target).with_settings(
        dsn=s.dsn if s.dsn_given else None,
        schema=s.schema if s.schema_given else None,
        transaction_pooling=True if transaction_pooling else None,
    )
    if not user_app.workflows:
        fail(f"{target} registers no workflow: decorate functions with @app.workflow")
    served = None
    if queues is not None:
        served = [q.strip() for q in queues.split(",") if q.strip()]
        if not served:
            raise typer.BadParameter("name at least one queue, e.g. --queues emails,default", param_hint="--queues")
    count = default_processes() if processes is None else processes
    if metrics_listen is not None:  # on the app's database (its module may have set it), or the reader login
        _serve_metrics(ctx, dataclasses.replace(s, dsn=user_app.dsn, schema=user_app.schema), metrics_listen)
    if count > 1:
        supervisor = handles_errors(Supervisor)(_child_command(ctx, target, worker_id), count)
        raise typer.Exit(handles_errors(supervisor.run)())
    w = handles_errors(user_app.worker)(
        concurrency=concurrency,
        lease=timedelta(seconds=lease),
        worker_id=worker_id,
        listen=not (no_listen or transaction_pooling),
        prune_older_than=retention,
        startup_timeout=startup_timeout,
        queues=served,
        buckets=buckets,
    )
    # Once the worker has stopped, this process only exits: a signal then (a supervisor passing
    # on a second one after this worker had drained) must not turn a clean stop into death by
    # signal. The worker's own handlers hold while it runs; these are what it restores.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    # Under a supervisor, an exit before the worker serves is a failed start.
    handles_errors(w.run)(on_started=supervised_ready if under_supervisor else None)


def _serve_metrics(ctx: typer.Context, s: Settings, listen: str) -> None:
    """Start the metrics endpoint of ``--metrics-listen``; it stops when the command ends."""
    from ..metrics import BadListen, serve

    try:
        endpoint = serve(s, listen, option="--metrics-listen")
    except BadListen as exc:
        fail(str(exc), code=2)
    except OSError as exc:
        fail(f"cannot listen on {listen}: {exc.strerror or exc}")
    ctx.call_on_close(endpoint.close)
    logging.getLogger("kestrel.metrics").info("event=metrics_serving url=%s", endpoint.url)


def _child_command(ctx: typer.Context, target: str, worker_id: str | None) -> Callable[[int], list[str]]:
    """``slot -> argv``: this command line again (the options given on it, --dsn included if it
    was; the environment is inherited), run by this interpreter, as one process."""
    base = [
        sys.executable,
        "-m",
        "kestrel_console",
        *_given_options(ctx.find_root()),
        "worker",
        *_given_options(ctx, skip={"processes", "worker_id", "metrics_listen"}),
        "--processes",
        "1",
    ]

    def command(slot: int) -> list[str]:
        named = ["--worker-id", f"{worker_id}-{slot}"] if worker_id is not None else []
        return [*base, *named, "--", target]

    return command


def _given_options(ctx: Any, skip: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """The options of ``ctx``'s command that were given on the command line, as arguments again
    (any option added later is passed on too)."""
    argv: list[str] = []
    for param in ctx.command.params:
        if param.param_type_name != "option" or param.name in skip:
            continue
        source = ctx.get_parameter_source(param.name)
        if source is None or source.name != "COMMANDLINE":
            continue
        value = ctx.params.get(param.name)
        if param.is_flag:
            if param.secondary_opts:
                argv.append(param.opts[0] if value else param.secondary_opts[0])
            elif value:
                argv.append(param.opts[0])
        elif param.multiple:
            for item in value or ():
                argv += [param.opts[0], str(item)]
        elif value is not None:
            argv += [param.opts[0], str(value)]
    return argv
