"""What every live screen shares: its own Reader, refreshes run in a worker thread whose
results are applied in order, database trouble reported to the banner, and operator actions
hidden and refused in --read-only mode.

A screen implements ``load(seq)`` as a ``@work(thread=True, exclusive=True, group=VIEW)``
method that calls ``self.fetch(seq, read, apply)``: ``read(reader)`` runs in the worker
thread, ``apply(data)`` on the UI thread, and only if no newer refresh was started since.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from textual import events, work
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Input, TextArea

from kestrel_console.read import Reader
from kestrel_core import first_line

from .allowed import ROWLESS, allows, why_not
from .config import statement_timeout_ms
from .host import ConsoleHost
from .operator import ACTIONS, VERBS, WRITES, ActionOutcome, Target, confirmation
from .widgets.comment import CommentModal
from .widgets.confirm import ConfirmModal
from .widgets.live_table import LiveTable

T = TypeVar("T")

# The key that pauses or resumes a queue (Queues) or a schedule (Schedules), and means nothing
# else on any screen: ``p`` pauses the refresh everywhere, so it cannot also stop production.
PAUSE_KEY = "h"
# The keys that pause and resume one execution on the execution screens (Executions, Execution,
# Dashboard), each meaning nothing else on any screen: "z" puts it to sleep, "u" unpauses it.
HOLD_KEY = "z"
LET_GO_KEY = "u"

# A refresh still running after this long is given up on (the Reader's timeout should have
# cancelled it long before): the next tick starts a new one.
STALE_LOAD_S = 15.0

# A screen switched back to shows old data until its refresh lands: its tables are dimmed to
# this opacity, never passed off as current.
STALE_OPACITY = 0.6


class LiveScreen(Screen):
    """A screen that reads Postgres on every refresh tick while it is the active one."""

    VIEW: ClassVar[str] = "view"
    NAME: ClassVar[str] = "View"
    # Keys handled without a Binding (shown by `?`): (key, what it does).
    HELP_EXTRA: ClassVar[list[tuple[str, str]]] = []
    # False: the screen reads only when asked (SQL, Reports), never on a refresh tick.
    REFRESHES: ClassVar[bool] = True
    # The id of the screen's one main table (``table``), on the screens built around one: its
    # VIEW unless said.
    TABLE: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A screen's stylesheet, unless it names one, is its VIEW's, beside its module
        (``queues.tcss``): one screen, one module, one stylesheet."""
        super().__init_subclass__(**kwargs)
        if "VIEW" in vars(cls) and "CSS_PATH" not in vars(cls):
            cls.CSS_PATH = f"{cls.VIEW}.tcss"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._seq = 0
        self._loading = False
        self._load_started = 0.0
        self.loads = 0  # refreshes applied (tests wait on it)
        self.last_loaded: float | None = None
        self._reader: Reader | None = None
        self._reader_lock = threading.Lock()
        self._offered: dict[str, bool | None] | None = None  # what the footer last showed
        self._stale = False

    @property
    def kapp(self) -> ConsoleHost:
        return self.app  # type: ignore[return-value]

    @property
    def table(self) -> LiveTable:
        """The screen's main table (``TABLE``, else the one with the VIEW's id)."""
        return self.query_one(f"#{self.TABLE or self.VIEW}", LiveTable)

    # -- reading -----------------------------------------------------------------------------

    def reader(self) -> Reader:
        """This view's Reader (worker threads only), on the read DSN (a replica) when given, its
        statement_timeout kept inside the refresh interval."""
        wanted = statement_timeout_ms(self.kapp.refresh_interval)
        with self._reader_lock:
            if self._reader is None:
                cfg = self.kapp.config
                self._reader = Reader(cfg.reads_dsn, schema=cfg.schema, statement_timeout_ms=wanted)
                self.kapp.track_reader(self._reader)
            elif self._reader.statement_timeout_ms != wanted:
                self._reader.close()  # the next call reconnects with the new timeout
                self._reader.statement_timeout_ms = wanted
            return self._reader

    def due(self, now: float, interval: float) -> bool:
        if self._loading and now - self._load_started < STALE_LOAD_S:
            return False
        return now - self._load_started >= interval

    def refresh_data(self, *, force: bool = False) -> None:
        """Start a refresh now, unless one is in flight (``force``: start anyway; the older
        one's result will be dropped)."""
        if not self.REFRESHES:
            return
        now = time.monotonic()
        if self._loading and not force and now - self._load_started < STALE_LOAD_S:
            return
        self._seq += 1
        self._loading = True
        self._load_started = now
        self.load(self._seq)

    def load(self, seq: int) -> object:  # pragma: no cover - every screen overrides
        """Start reading refresh ``seq``'s data (a screen's ``@work`` load returns its Worker)."""
        raise NotImplementedError

    def fetch(self, seq: int, read: Callable[[Reader], T], apply: Callable[[T], None]) -> None:
        """Worker-thread half of a refresh: read, then hand the result to the UI thread."""
        try:
            data = read(self.reader())
        except Exception as exc:  # reported on the banner or as a notification
            self._to_ui(self._failed, seq, exc)
            return
        self._to_ui(self._applied, seq, apply, data)

    def _to_ui(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        try:
            self.app.call_from_thread(fn, *args, **kwargs)
        except RuntimeError:  # the app is closing
            pass

    def _applied(self, seq: int, apply: Callable[[Any], None], data: Any) -> None:
        if seq != self._seq or not self.is_attached:
            return  # a newer refresh was started: this result is out of date
        self._loading = False
        self.kapp.db_ok()
        self._mark_stale(False)
        apply(data)
        self.loads += 1
        self.last_loaded = time.monotonic()

    def _failed(self, seq: int, exc: Exception) -> None:
        if seq != self._seq:
            return
        self._loading = False
        self.kapp.db_failed(exc)
        if self.is_attached:
            self.load_failed(exc)

    def load_failed(self, exc: Exception) -> None:
        """Hook: a refresh failed (timed out, database unreachable); the screen may say so
        where it would show a count."""

    @property
    def stale(self) -> bool:
        """What the screen shows is older than the refresh interval (a screen switched back
        to): it is dimmed and says "refreshing…" until the refresh started on resume lands."""
        return self._stale

    def _mark_stale(self, stale: bool) -> None:
        """Dim the screen's tables, or light them again, with an inline opacity. A CSS class
        would restyle the node it is set on and everything inside it: on the screen, every
        widget, the footer's keys included; on a table, its cursor, header and row styles, at
        every switch back and at the refresh after it. An inline style only repaints."""
        if stale == self._stale:
            return
        self._stale = stale
        for table in self.query(DataTable):
            if stale:
                table.styles.opacity = STALE_OPACITY
            else:
                table.styles.clear_rule("opacity")

    def on_screen_resume(self) -> None:
        if self.REFRESHES and (
            self.last_loaded is None or time.monotonic() - self.last_loaded > self.kapp.refresh_interval
        ):
            self._mark_stale(True)
            self.stale_changed()
        self.refresh_data(force=True)

    def stale_changed(self) -> None:
        """Hook: a screen with a status line says "refreshing…" there."""

    def on_unmount(self) -> None:
        # A popped detail screen gives its connection back (off the UI thread: a query still
        # running holds the Reader's lock until its statement_timeout).
        reader, self._reader = self._reader, None
        if reader is not None:
            threading.Thread(target=reader.close, daemon=True, name="kestrel-reader-close").start()

    # -- operator actions ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ACTIONS or action in WRITES:
            if self.kapp.read_only:
                return False  # hidden from the footer and from `?`, and not run
            return self.offers(action)
        return True

    def listed_in_help(self, action: str, parameters: tuple[object, ...] = ()) -> bool:
        """``?`` lists every key of the screen, whatever the row under the cursor allows;
        only --read-only leaves the actions out."""
        return not ((action in ACTIONS or action in WRITES) and self.kapp.read_only)

    def action_rows(self) -> list[dict[str, Any]] | None:
        """The rows an operator action would apply to (marked, else under the cursor), as
        ``allowed.allows`` reads them; None: this screen does not say (every action offered)."""
        return None

    def offers(self, action: str) -> bool:
        """Whether ``action`` is offered now: some row it would apply to allows it."""
        if action in ROWLESS:
            return True
        try:
            rows = self.action_rows()
        except NoMatches:  # asked before the screen's widgets exist
            return False
        return rows is None or any(allows(action, row) for row in rows)

    def selection_changed(self) -> None:
        """The cursor, the marks or the rows changed: re-decide which actions the footer offers.
        The footer is redrawn only when that changed: a redraw rebuilds and restyles every key
        in it, and every refresh tick calls this."""
        offered = {action: self.check_action(action, ()) for action in set(self.action_keys().values())}
        if offered != self._offered:
            self._offered = offered
            self.refresh_bindings()

    def action_keys(self) -> dict[str, str]:
        """key -> operator action, for this screen's bindings."""
        out: dict[str, str] = {}
        for binding in Binding.make_bindings(self.BINDINGS):
            if binding.action in ACTIONS or binding.action in WRITES:
                for key in binding.key.split(","):
                    out[key.strip()] = binding.action
        return out

    def on_key(self, event: events.Key) -> None:
        # A hidden action key (read-only, or a state that does not allow it): say why nothing
        # happens instead of asking for a confirmation that can only end in a refusal.
        if isinstance(self.focused, (Input, TextArea)):
            return
        action = self.action_keys().get(event.key)
        if action is None:
            return
        if self.kapp.read_only:
            event.stop()
            self.kapp.refuse_read_only(action)
        elif not self.offers(action):
            event.stop()
            rows = self.action_rows()
            self.kapp.tell(why_not(action, rows[0] if rows else None), severity="warning")

    # -- what an action applies to: ids, never a cursor position --------------------------------

    def cursor_table(self) -> Any:
        """The LiveTable whose cursor or marks choose the action's rows (None: no such table)."""
        return None

    def describe_row(self, key: str | None) -> str:
        """A row of ``cursor_table`` as a confirmation names it."""
        return f"row {key}"

    def current_status(self, target: Target) -> str | None:
        """``target``'s state as this screen shows it now (None: no longer shown), so that a
        confirmation answered after a refresh changed it is asked again or refused."""
        return target.status

    def _cursor_moved_by_refresh(self) -> bool:
        """The row under the cursor left the list (a refresh removed it) and the cursor landed
        on a neighbour the operator did not choose: say so, act on nothing (the next key press
        acts on the row under the cursor then, its id named in the confirmation)."""
        table = self.cursor_table()
        if table is None or table.marks or table.cursor_lost is None:
            return False
        lost, table.cursor_lost = table.cursor_lost, None
        now = table.cursor_key()
        where = (
            f"the cursor is now on {self.describe_row(now)}: press the key again to act on it"
            if now
            else "the list is empty"
        )
        self.kapp.tell(
            f"nothing done: {self.describe_row(lost)}, under the cursor, {table.cursor_lost_why}; {where}",
            severity="warning",
        )
        return True

    def act(self, action: str, targets: list[Target]) -> None:
        """Ask for a comment (the reason, kept in the audit table), then y/n, then run
        ``action`` on ``targets`` in a worker.

        ``targets`` are ids, taken when the key is pressed. If the row under the cursor left
        the list just before, nothing is asked; if a target leaves or changes state while the
        question is on screen, ``y`` refuses (it left) or asks again naming its new state."""
        if self.kapp.read_only:
            self.kapp.refuse_read_only(action)
            return
        if self._cursor_moved_by_refresh():
            return
        if not targets:
            self.kapp.tell("nothing selected", severity="warning")
            return

        def confirm(comment: str | None) -> None:
            if comment is None:  # escape in the comment prompt
                return
            self._confirm(action, targets, comment or None)

        self.app.push_screen(
            CommentModal(_title(action, targets), f"{_reason_prompt(action, targets)} (optional):", placeholder="why"),
            confirm,
        )

    def _confirm(self, action: str, targets: list[Target], comment: str | None, changed: str = "") -> None:
        question = changed + confirmation(action, targets, self.kapp.config.operator, comment)

        def done(yes: bool | None) -> None:
            if not yes:
                return
            now = {t: self.current_status(t) for t in targets}
            gone = [t for t in targets if now[t] is None]
            if gone:
                self.kapp.tell(
                    f"{VERBS[action][0].lower()} refused, nothing done: "
                    + ", ".join(_named(t) for t in gone)
                    + " left the list while you were asked (changed elsewhere)",
                    severity="warning",
                )
                return
            moved = [t for t in targets if now[t] != t.status]
            if moved:
                fresh = [replace(t, status=now[t] or t.status) for t in targets]
                said = "; ".join(f"{_named(t)} is now {now[t]} (was {t.status})" for t in moved)
                self._confirm(action, fresh, comment, f"Changed while you were asked: {said}.\n")
                return
            self.perform_action(action, targets, comment)

        self.app.push_screen(ConfirmModal(question, title=_title(action, targets)), done)

    @work(thread=True, group="actions", exit_on_error=False)
    def perform_action(self, action: str, targets: list[Target], comment: str | None) -> None:
        try:
            outcome = self.kapp.operator.run(action, targets, comment)
        except Exception as exc:
            self._to_ui(self.kapp.action_failed, action, exc)
            return
        self._to_ui(self._action_done, outcome)

    def _action_done(self, outcome: ActionOutcome) -> None:
        self.kapp.action_done(outcome)
        self.after_action(outcome)
        self.refresh_data(force=True)

    def after_action(self, outcome: ActionOutcome) -> None:
        """Hook: e.g. clear the marks of the rows acted on."""

    def pause_refused(self, kind: str) -> bool:
        """In --read-only mode, say that pausing a queue or schedule is refused; True then."""
        if self.kapp.read_only:
            self.kapp.tell(
                f"read-only mode: pausing or resuming a {kind} is refused (the console was started with --read-only)",
                severity="warning",
            )
        return self.kapp.read_only

    def confirm_pause(self, kind: str, name: str, pause: bool, question: str) -> None:
        """Ask ``question`` (y/n), then pause or resume the queue or schedule ``name`` through
        the operator API (audited)."""
        verb = "Pause" if pause else "Resume"

        def done(yes: bool | None) -> None:
            if yes:
                self.set_paused(kind, name, pause)

        self.app.push_screen(ConfirmModal(question, title=f"{verb} {kind} {name}"), done)

    @work(thread=True, group="actions", exit_on_error=False)
    def set_paused(self, kind: str, name: str, pause: bool) -> None:
        from kestrel_core import ActionRefused, DatabaseUnavailable, NotFound

        try:
            said = self.kapp.operator.set_paused(kind, name, pause)
        except (ActionRefused, NotFound) as exc:
            self._to_ui(self.kapp.tell, first_line(exc), severity="warning")
        except DatabaseUnavailable as exc:
            self._to_ui(self.kapp.db_failed, exc)
        except Exception as exc:
            self._to_ui(self.kapp.tell, f"{'pause' if pause else 'resume'} failed: {first_line(exc)}", severity="error")
        else:
            self._to_ui(self.kapp.tell, said)
        self._to_ui(self.refresh_data, force=True)


# The base of a mixin of live screens (StateActions, FilterLine, ...): the type checker reads
# it as a LiveScreen, whose methods the mixin calls; at run time it is object, the screen class
# that mixes it in bringing LiveScreen itself.
if TYPE_CHECKING:
    ScreenMixin = LiveScreen
else:
    ScreenMixin = object


def _named(target: Target) -> str:
    if target.step_id:
        return f"gate {target.step_id!r} of execution {target.execution_id}"
    return f"execution {target.execution_id}"


def _reason_prompt(action: str, targets: list[Target]) -> str:
    """What the comment prompt asks: every action records a reason in the audit table."""
    one = targets[0]
    if action in ("approve", "reject"):
        noun = f"gate {one.step_id!r} of execution {one.execution_id}" if len(targets) == 1 else f"{len(targets)} gates"
        return f"Comment for the decision on {noun}"
    noun = f"execution {one.execution_id}" if len(targets) == 1 else f"{len(targets)} executions"
    return f"Reason to {VERBS[action][0].lower()} {noun}"


def _title(action: str, targets: list[Target]) -> str:
    verb = VERBS[action][0]
    if len(targets) == 1:
        return f"{verb} execution {targets[0].execution_id}"
    return f"{verb} {len(targets)} marked"
