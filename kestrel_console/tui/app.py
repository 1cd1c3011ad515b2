"""The Kestrel console: live screens on the number keys, refreshed from Postgres on a timer in
worker threads, with a banner while the database is unreachable and every operator action
behind a confirmation (or refused outright with --read-only)."""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar, Unpack

from textual import events, work
from textual.app import App
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import ModalScreen

from kestrel_core import DatabaseUnavailable, SchemaOutdated, first_line

from ..read.replica import ReplicaState, lsn_number
from ..safe_text import visible
from ..settings import DEFAULT_REFRESH, ConsoleOptions, console_settings
from .commands import KestrelCommands
from .config import step_preset
from .header import header_text
from .keys import ROUTED, KeyRouter
from .live import LiveScreen
from .operator import VERBS, ActionOutcome, Operator, ReadOnlyRefused
from .registry import modes, screen_bindings
from .screens.help import HelpScreen
from .screens.reports import ReportsScreen
from .widgets.confirm import ConfirmModal
from .widgets.scrollbar import use_whole_cell_scrollbars

TICK_S = 0.1
# While the database is unreachable, retry this often (whatever the refresh rate or pause).
RETRY_S = 1.0
NOTICES_KEPT = 100
# How often the replica's lag is read (with --read-dsn), whatever the refresh interval.
REPLICA_POLL_S = 1.0


class KestrelConsole(App[None]):
    """``KestrelConsole(settings)`` or ``KestrelConsole(dsn=..., operator=...)``; ``refresh`` is
    the refresh interval in seconds, ``read_only`` hides and refuses every action."""

    TITLE = "Kestrel"
    CSS_PATH = "app.tcss"
    MODES: ClassVar[dict[str, Any]] = modes()
    DEFAULT_MODE = "dashboard"
    COMMANDS = App.COMMANDS | {KestrelCommands}
    BINDINGS: ClassVar[list[Any]] = [
        *screen_bindings(),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "back", "Back/quit", key_display="q"),
        Binding("p", "toggle_pause", "Pause", show=False),
        # As in pg_activity: + lengthens the refresh interval, - shortens it.
        Binding("plus", "slower", "Refresh less often", show=False, key_display="+"),
        Binding("minus", "faster", "Refresh more often", show=False, key_display="-"),
        Binding("r", "refresh_now", "Refresh now", show=False),
    ]

    db_problem: reactive[tuple[str, str] | None] = reactive(None)
    # With a read replica (--read-dsn): the banner's warning while it is too far behind.
    lag_problem: reactive[str | None] = reactive(None)
    paused: reactive[bool] = reactive(False)
    refresh_interval: reactive[float] = reactive(DEFAULT_REFRESH)

    def __init__(
        self,
        settings: Any = None,
        *,
        quit_stops: str | None = None,
        **options: Unpack[ConsoleOptions],
    ) -> None:
        """``settings`` and ``options`` as for ``console_settings``. ``quit_stops``: what
        quitting the console also stops (the demo's workers and server), asked about before
        ``q`` quits."""
        self.config = console_settings(settings, **options)
        super().__init__()
        use_whole_cell_scrollbars()
        self.read_only = self.config.read_only
        self.set_reactive(KestrelConsole.refresh_interval, self.config.refresh)
        self.operator = Operator(self.config)
        self.notices: list[tuple[str, str]] = []  # (severity, message) of every notification
        self.report_index: dict[str, Any] = {}
        self._readers: list[Any] = []
        self._sessions: list[Any] = []
        self._failures = 0
        self._down_since: float | None = None
        self.keys = KeyRouter(self)
        self.quit_stops = quit_stops
        # The read replica, when the console has one: its last state, and the executions acted
        # on whose change it has not replayed yet (id -> (status on the primary, WAL position)).
        self.replica: ReplicaState | None = None
        self.awaiting_replica: dict[int, tuple[str, int]] = {}
        self._replica_reader: Any = None

    # -- keys ---------------------------------------------------------------------------------------

    async def on_event(self, event: events.Event) -> None:
        """Keys from the terminal are decided by the KeyRouter (keys.py), in the order typed."""
        if isinstance(event, events.Key) and not event.is_forwarded:
            if not self.app_focus:
                self.app_focus = True
            await self.keys.take(event)
            return
        await super().on_event(event)

    async def _on_key(self, event: events.Key) -> None:
        if getattr(event, ROUTED, False):
            return  # its bindings were looked at when it was routed: never run one twice
        await super()._on_key(event)

    # -- lifecycle ----------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._subtitle()
        self.set_interval(TICK_S, self._tick)
        self.index_reports()
        if self.config.read_dsn:
            self.set_interval(REPLICA_POLL_S, self.poll_replica)
            self.poll_replica()

    def on_unmount(self) -> None:
        # Close connections off the UI thread: a query still running holds its Reader's lock.
        things = [*self._readers, *self._sessions, self.operator]
        if self._replica_reader is not None:
            things.append(self._replica_reader)
        threading.Thread(target=_close_all, args=(things,), daemon=True, name="kestrel-close").start()

    def track_reader(self, reader: Any) -> None:
        self._readers.append(reader)

    def track_session(self, session: Any) -> None:
        self._sessions.append(session)

    @work(thread=True, group="report-index", exit_on_error=False)
    def index_reports(self) -> None:
        """Report names for the command palette (file reads: off the UI thread)."""
        from kestrel_console.reports import discover

        try:
            found = discover(self.config.queries, broken=[])
        except Exception:
            try:
                found = discover((), broken=[])
            except Exception:
                found = {}
        self.call_from_thread(setattr, self, "report_index", found)

    # -- the read replica -------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="replica", exit_on_error=False)
    def poll_replica(self) -> None:
        """Read the replica's lag (its own connection: a slow screen does not delay it). An
        unreachable replica is the screens' banner to show, not this one's."""
        from kestrel_console.read import Reader

        if self._replica_reader is None:
            self._replica_reader = Reader(self.config.reads_dsn, schema=self.config.schema, statement_timeout_ms=2000)
        try:
            state = self._replica_reader.replica_state()
        except Exception:
            state = None
        try:
            self.call_from_thread(self.replica_read, state)
        except RuntimeError:  # the app is closing
            pass

    def replica_read(self, state: ReplicaState | None) -> None:
        """Show the replica's lag in the header, a banner past --max-lag, and forget the actions
        it has replayed."""
        self.replica = state
        self.lag_problem = state.warning(self.config.max_lag) if state and state.behind(self.config.max_lag) else None
        if state is not None:
            replayed = lsn_number(state.replay_lsn) if state.replica else None
            self.awaiting_replica = {
                eid: (status, lsn)
                for eid, (status, lsn) in self.awaiting_replica.items()
                if replayed is not None and replayed < lsn
            }
        self._subtitle()

    # -- refresh --------------------------------------------------------------------------------------

    def live_screen(self) -> LiveScreen | None:
        """The screen that refreshes now: the top-most live one (modals keep it below them)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, LiveScreen):
                return screen
        return None

    def live_screens(self) -> list[LiveScreen]:
        """Every live screen of the current stack, top first: a list under a detail screen
        keeps refreshing, so going back never shows data older than the refresh interval."""
        return [s for s in reversed(self.screen_stack) if isinstance(s, LiveScreen)]

    def _tick(self) -> None:
        now = time.monotonic()
        down = self.db_problem is not None and self.db_problem[0] == "down"
        for screen in self.live_screens():
            if down:
                if screen.due(now, RETRY_S):
                    screen.refresh_data()
                return  # while the database is down only the top screen retries
            if not self.paused and screen.due(now, self.refresh_interval):
                screen.refresh_data()

    def action_refresh_now(self) -> None:
        screen = self.live_screen()
        if screen is not None:
            screen.refresh_data(force=True)

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self.tell("refresh paused (p resumes)" if self.paused else "refresh resumed")

    def set_refresh(self, seconds: float) -> None:
        self.refresh_interval = seconds
        self.tell(f"refresh every {seconds:g} s")

    def action_faster(self) -> None:
        self.set_refresh(step_preset(self.refresh_interval, -1))

    def action_slower(self) -> None:
        self.set_refresh(step_preset(self.refresh_interval, +1))

    def watch_paused(self) -> None:
        self._subtitle()

    def watch_refresh_interval(self) -> None:
        self._subtitle()

    def on_resize(self, event: events.Resize) -> None:
        self._subtitle(event.size.width)

    def _subtitle(self, width: int | None = None) -> None:
        """Title and sub-title, the longest form that fits the header at this width."""
        self.title, self.sub_title = header_text(
            self.config.dsn,
            self.config.schema,
            self.config.operator,
            self.refresh_interval,
            paused=self.paused,
            read_only=self.read_only,
            width=width or self.size.width,
            replica=self.replica.short() if self.replica is not None else ("replica ?" if self.config.read_dsn else ""),
        )

    # -- database health --------------------------------------------------------------------------------

    def db_ok(self) -> None:
        if self.db_problem is not None:
            was_down = self.db_problem[0] == "down"
            self.db_problem = None
            if was_down:
                self.tell("the database is reachable again")
        self._failures = 0
        self._down_since = None

    def db_failed(self, exc: Exception) -> None:
        """Show what went wrong: unreachable (banner, retrying), slow (banner), or else a notice."""
        from kestrel_console.read import ReadTimeout

        message = first_line(exc)
        if isinstance(exc, DatabaseUnavailable):
            self._failures += 1
            if self._down_since is None:
                self._down_since = time.monotonic()
            down_for = time.monotonic() - self._down_since
            self.db_problem = (
                "down",
                f"⚠ database unreachable: {message}\n"
                f"retrying every {RETRY_S:g} s (attempt {self._failures}, down {down_for:.0f} s); "
                "the screen keeps the data it last read",
            )
        elif isinstance(exc, ReadTimeout):
            self.db_problem = ("slow", f"⚠ {message}; showing the last data read")
        elif isinstance(exc, SchemaOutdated):
            self.db_problem = ("down", f"⚠ {message}")
        else:
            self.tell(f"{type(exc).__name__}: {message}", severity="error")

    # -- screens ------------------------------------------------------------------------------------------

    async def action_show(self, mode: str) -> None:
        """A number key: that screen itself, never what was last opened from it (key 2 is
        the Executions list, not the last execution's detail), and no longer a level below
        the screen it was once opened from (esc and q stay on it)."""
        if self.current_mode != mode:
            await self.switch_mode(mode)
        while len(self.screen_stack) > 1:
            await self.pop_screen()
        if getattr(self.screen, "came_from", None):
            self.screen.came_from = None  # type: ignore[attr-defined]

    async def action_back(self) -> None:
        """``q`` (and ``esc`` where a screen has nothing of its own to close): one level back:
        a dialog is answered no, a screen pushed over another is closed, a list opened from a
        dashboard count goes back to the dashboard; on a top screen, quit, after asking if
        quitting would stop more than the console (``quit_question``)."""
        screen = self.screen
        if isinstance(screen, ModalScreen):
            screen.dismiss(None)
            return
        if len(self.screen_stack) > 1:
            self.pop_screen()
            return
        came_from = getattr(screen, "came_from", None)
        if came_from:
            await self.action_show(came_from)
            return
        question = self.quit_question()
        if question is None:
            self.exit()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()

        self.push_screen(ConfirmModal(question, title="Quit the console?"), answered)

    def quit_question(self) -> str | None:
        """What ``q`` asks before quitting, or None when quitting stops nothing but the console."""
        said = []
        if self.quit_stops:
            said.append(f"Quitting also stops {self.quit_stops}.")
        running = [w for w in self.workers if w.group == "actions" and not w.is_finished]
        if running:
            said.append(
                f"{len(running)} operator action{'s' if len(running) != 1 else ''} still running: quitting"
                " now may leave it half done (each execution's change commits or rolls back on its own)."
            )
        if not said:
            return None
        return "\n".join([*said, "Quit? (ctrl+q quits at once)"])

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.screen))

    async def open_report(self, name: str) -> None:
        """Go to the Reports screen and run report ``name`` (command palette)."""
        if self.current_mode != "reports":
            await self.switch_mode("reports")
        if isinstance(self.screen, ReportsScreen):
            self.screen.select_report(name, run=True)

    # -- actions ------------------------------------------------------------------------------------------

    def refuse_read_only(self, action: str) -> None:
        self.tell(
            f"read-only mode: {VERBS[action][0].lower()} refused (the console was started with --read-only)",
            severity="warning",
        )

    def action_done(self, outcome: ActionOutcome) -> None:
        """Say what the primary answered; with a replica, remember the executions whose change
        it has not replayed yet (the lists mark them until it has)."""
        lsn = lsn_number(outcome.primary_lsn)
        if lsn is not None:
            for eid, status in outcome.confirmed.items():
                self.awaiting_replica[eid] = (status, lsn)
        self.tell(outcome.summary(), severity="warning" if outcome.refused else "information")

    def action_failed(self, action: str, exc: Exception) -> None:
        if isinstance(exc, ReadOnlyRefused):
            self.refuse_read_only(action)
            return
        if isinstance(exc, DatabaseUnavailable):
            self.db_failed(exc)
        self.tell(f"{VERBS[action][0].lower()} failed: {first_line(exc)}", severity="error")

    def tell(self, message: str, *, severity: str = "information") -> None:
        """Notify the operator (and keep the message: tests and the log read ``notices``)."""
        self.notices.append((severity, message))
        del self.notices[:-NOTICES_KEPT]
        self.notify(visible(message, newlines=True), severity=severity, markup=False)  # type: ignore[arg-type]


def _close_all(things: list[Any]) -> None:
    for thing in things:
        try:
            thing.close()
        except Exception:
            pass
