"""Starts the demo (database, schema, workers, seed, trickle, bot), runs it, stops it in order.

Order out: bot and trickle, then the workers (running steps get a short grace, the rest is
handed back to the queue), then the private PostgreSQL if this run started it. SIGINT and
SIGTERM end the demo the same way; a signal during shutdown does not cut it short.
"""

from __future__ import annotations

import dataclasses
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

import psycopg
from rich.console import Console
from rich.status import Status

from kestrel_console.settings import Settings
from kestrel_core import Kestrel, KestrelError, mask_dsn
from kestrel_core.db import one_row, render, statements_beside
from kestrel_core.engine import SignalRelay, Worker

from .bot import BotOperator
from .database import DemoDatabase, demo_database, reader_login
from .events import EventPrinter, silence_engine_logs, worker_events_printed
from .trickle import Trickle, seed
from .workflows import REMEDIATE, build_app

SQL = statements_beside(__file__)

WORKER_LEASE = timedelta(seconds=10)
STOP_GRACE = timedelta(seconds=3)
TUI_MODULE = "kestrel_console.cli.tui_command"


@dataclass(frozen=True)
class DemoOptions:
    """What ``kestrel-console demo`` was asked for."""

    tui: bool = True
    workers: int = 2
    concurrency: int = 4
    rate_per_min: float = 30.0
    duration: float | None = None  # seconds; None: until SIGINT/SIGTERM (or the TUI quits)
    summary_every: float = 5.0
    seed_history: bool = True
    fresh: bool = False  # drop and recreate the demo's database (or --dsn's schema) first
    bot: bool = True  # the bot operator decides non-critical approvals


class Progress:
    """Startup and shutdown lines on stderr, with a spinner while something slow runs."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._status: Status | None = None

    def __call__(self, message: str) -> None:
        self.console.print(f"· {mask_dsn(message)}", markup=False, highlight=False)
        if self._status is not None:
            self._status.update(mask_dsn(message))

    @contextmanager
    def spinning(self, message: str) -> Iterator[None]:
        with self.console.status(message) as status:
            self._status = status
            try:
                yield
            finally:
                self._status = None


class StopSignals:
    """SIGINT/SIGTERM record a stop request; nothing is cut short mid-way.

    Starting, the request is acted on between phases (:meth:`checkpoint`), so initdb or a
    worker is never killed half-way; the headless loop waits on it; while the TUI runs
    (``interrupt``) the first signal raises KeyboardInterrupt to leave it. The request is set
    outside the signal handler (``SignalRelay``): setting an Event there could hang the demo
    when a second signal came while the first one's handler held the Event's lock.
    """

    def __init__(self) -> None:
        self.requested = threading.Event()  # set by the relay's thread, for waiting on
        self.signalled = False  # set in the handler itself (no lock): true as soon as it ran
        self.interrupt = False
        self._relay: SignalRelay | None = None

    def install(self) -> None:
        self._relay = SignalRelay(lambda _signum: self.requested.set(), in_handler=self._interrupt)
        self._relay.__enter__()

    def restore(self) -> None:
        if self._relay is not None:
            self._relay.__exit__(None, None, None)
            self._relay = None

    def asked(self) -> bool:
        """Whether a signal asked to stop."""
        return self.signalled or self.requested.is_set()

    def checkpoint(self) -> None:
        """Stop starting up if a signal asked to (unwinds through every clean-up)."""
        if self.asked():
            raise KeyboardInterrupt

    def _interrupt(self, _signum: int) -> None:
        self.signalled = True
        if self.interrupt:
            self.interrupt = False  # once: a second signal must not break the clean-up
            raise KeyboardInterrupt


def run_demo(settings: Settings, options: DemoOptions) -> None:
    """Run the demo until the TUI quits, a signal arrives or ``options.duration`` passes."""
    progress = Progress(Console(stderr=True))
    open_tui = _tui_opener(progress) if options.tui else None
    printer = EventPrinter()
    on_event: Callable[[str], None] = printer if open_tui is None else _ignore
    stop = StopSignals()
    stop.install()
    try:
        with demo_database(
            settings.dsn if settings.dsn_given else None, settings.schema, options.fresh, progress, progress.spinning
        ) as database:
            dsn = database.dsn
            stop.checkpoint()
            with (
                _logging_for(open_tui is None, printer),
                DemoServices(dsn, settings.schema, options, progress, on_event, stop) as services,
            ):
                printer.run_time = services.run_time
                # The private server's login is a superuser: ad-hoc SQL gets its own reader login.
                reader_dsn = settings.reader_dsn or (reader_login(dsn) if database.data_dir else None)
                if open_tui is not None:
                    stop.interrupt = True  # SIGTERM while the TUI runs: leave it and shut down
                    stop.checkpoint()
                    stops = "the demo: its workers" + (" and its PostgreSQL server" if database.data_dir else "")
                    open_tui(
                        dataclasses.replace(settings, dsn=dsn, dsn_given=True, reader_dsn=reader_dsn),
                        read_only=False,
                        quit_stops=stops,
                    )
                    return
                _announce(database, options, settings.dsn_given, reader_dsn)
                _run_headless(services, options, printer, stop)
    except KeyboardInterrupt:
        progress("interrupted: demo stopped")
    except KestrelError:
        if not stop.asked():
            raise
        progress("interrupted while starting: demo stopped")  # e.g. Ctrl-C reached initdb too
    finally:
        stop.restore()


class DemoServices:
    """The demo's app, workers, seed burst, trickle and bot operator, started and stopped together."""

    def __init__(
        self,
        dsn: str,
        schema: str,
        options: DemoOptions,
        progress: Progress,
        on_event: Callable[[str], None],
        stop: StopSignals,
    ) -> None:
        self.options = options
        self.progress = progress
        self.on_event = on_event
        self.stop_signals = stop
        self.app: Kestrel = build_app(dsn, schema)
        self.rng = random.Random()
        self.workers: list[Worker] = []
        self.trickle: Trickle | None = None
        self.bot: BotOperator | None = None

    def __enter__(self) -> DemoServices:
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start(self) -> None:
        options = self.options
        with self.progress.spinning("migrating"):
            self.progress(f"migrating schema {self.app.schema!r}")
            self.app.migrate()
        self.stop_signals.checkpoint()
        with self.app.connection() as conn:
            earlier = one_row(conn.execute(render(SQL.earlier_runs, self.app.schema)).fetchone(), "earlier_runs")[0]
        if earlier:
            self.progress(f"{earlier} executions of earlier runs are kept (--fresh starts from empty)")
        with self.progress.spinning("starting workers"):
            host, pid = socket.gethostname(), os.getpid()
            for n in range(1, options.workers + 1):
                worker = self.app.worker(
                    concurrency=options.concurrency, lease=WORKER_LEASE, worker_id=f"demo-{n}@{host}:{pid}"
                )
                worker.start()
                self.workers.append(worker)  # only started ones are stopped
                self.stop_signals.checkpoint()
            self.progress(f"started {options.workers} demo workers, {options.concurrency} slots each")
        if options.seed_history:
            seed(self.app, self.rng, self.on_event)
            self.stop_signals.checkpoint()
        self.trickle = Trickle(self.app, options.rate_per_min, self.rng, self.on_event).start()
        if options.bot:
            self.bot = BotOperator(self.app, REMEDIATE, self.on_event).start()
            self.progress(
                "demo-bot decides non-critical approvals about 4 s after they open (--no-bot leaves them all to you)"
            )
        else:
            self.progress("--no-bot: every approval waits for you")

    def run_time(self, execution_id: int) -> float | None:
        """Seconds from the execution's start to its finish, None if unknown."""
        try:
            with self.app.connection() as conn:
                row = conn.execute(render(SQL.run_time, self.app.schema), {"id": execution_id}).fetchone()
        except (KestrelError, psycopg.Error):
            return None
        return None if row is None else row[0]

    def __exit__(self, *_exc: object) -> None:
        self.stop_signals.interrupt = False
        with self.progress.spinning("stopping the demo"):
            for part in (self.bot, self.trickle):
                if part is not None:
                    part.stop()
            if self.workers:
                self.progress(f"stopping {len(self.workers)} demo workers")
                stopping = [threading.Thread(target=w.stop, kwargs={"grace": STOP_GRACE}) for w in self.workers]
                for thread in stopping:
                    thread.start()
                for thread in stopping:
                    thread.join()
            self.app.close()


@contextmanager
def _logging_for(headless: bool, printer: EventPrinter) -> Iterator[None]:
    if headless:
        with worker_events_printed(printer):
            yield
    else:
        with silence_engine_logs():
            yield


def _ignore(_text: str) -> None:
    """Events are not printed while the TUI owns the screen."""


def _tui_opener(progress: Progress) -> Callable[..., None] | None:
    """``open_tui`` if the TUI is installed, else None (the demo runs headless)."""
    try:
        module = __import__(TUI_MODULE, fromlist=["open_tui"])
    except ModuleNotFoundError as exc:
        if exc.name != TUI_MODULE:
            raise
        progress("the TUI is not available in this installation: running headless")
        return None
    return module.open_tui


def _announce(database: DemoDatabase, options: DemoOptions, dsn_given: bool, reader_dsn: str | None) -> None:
    """Say where the demo runs, where its data is, and how to reach it from another terminal
    (no password shown)."""
    dsn = database.dsn
    rate = (
        f"about {options.rate_per_min:g} new workflows a minute"
        if options.rate_per_min > 0
        else "no new workflows after the seed"
    )
    lines = [f"Kestrel demo running on {database.where}: {options.workers} workers, {rate}.", f"DSN: {mask_dsn(dsn)}"]
    if database.data_dir is not None:
        lines.append(f"Data: {database.data_dir} (kept for the next run; --fresh starts from empty)")
    lines.append(
        "Approvals: demo-bot decides non-critical ones within seconds; critical ones wait for you."
        if options.bot
        else "Approvals: all wait for you (--no-bot)."
    )
    if dsn_given:
        lines += [
            "In another terminal, every command works with the same --dsn or $KESTREL_DSN, e.g.:",
            "  kestrel-console status",
            "  kestrel-console",
            "Ctrl-C stops the demo.",
        ]
    else:
        lines += [
            "In another terminal, every command works against it, e.g.:",
            f"  KESTREL_DSN='{dsn}' kestrel-console status",
            f"  KESTREL_DSN='{dsn}' kestrel-console",
            *(
                [
                    f"  KESTREL_DSN='{dsn}' KESTREL_READER_DSN='{reader_dsn}' kestrel-console sql "
                    '"SELECT status, count(*) FROM workflow_executions GROUP BY 1"'
                ]
                if reader_dsn
                else []
            ),
            "Ctrl-C stops the demo and its PostgreSQL (the data stays for the next run).",
        ]
    print("\n".join(lines), flush=True)


def _run_headless(services: DemoServices, options: DemoOptions, printer: EventPrinter, stop: StopSignals) -> None:
    stop.interrupt = False  # from here a signal only ends the loop below
    deadline = None if options.duration is None else time.monotonic() + options.duration
    next_summary = time.monotonic() + options.summary_every
    while True:
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            printer(f"--duration {options.duration:g}s reached")
            break
        wake = next_summary if deadline is None else min(next_summary, deadline)
        if stop.requested.wait(max(0.05, wake - now)):
            printer("stop requested")
            break
        if time.monotonic() >= next_summary:
            printer.summary(services.app)
            next_summary += options.summary_every
    if time.monotonic() - (next_summary - options.summary_every) > 1.0:
        printer.summary(services.app)  # the last state, unless just printed
