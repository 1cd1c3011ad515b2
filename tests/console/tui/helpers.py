"""Driving the console under Pilot: wait for real refreshes, read what the screen shows."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any, NamedTuple, TypeVar

import psycopg
from psycopg.types.json import Jsonb
from textual.command import CommandList, CommandPalette

from kestrel_console.tui import KestrelConsole
from kestrel_console.tui.live import LiveScreen
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.widgets.confirm import ConfirmModal

OPERATOR = "tui-tester"
SIZE = (160, 50)

COUNT_BY_STATUS = "SELECT status, count(*) FROM workflow_executions GROUP BY status"
COUNT_BY_WORKFLOW_STATUS = "SELECT workflow_name, status, count(*) FROM workflow_executions GROUP BY 1, 2"
# The audit rows the console wrote (seed_history writes some of its own, by other actors).
ACTIONS = (
    "SELECT actor, action, execution_id, step_id, comment, from_status "
    "FROM operator_actions WHERE actor = 'tui-tester' ORDER BY id"
)
STATUS_OF = "SELECT id, status FROM workflow_executions ORDER BY id"
WAIT_OF = (
    "SELECT decision, decided_by, comment, resolved_at IS NOT NULL "
    "FROM workflow_waits WHERE execution_id = %s AND step_id = %s"
)


S = TypeVar("S")
# What record_actions records: (action, execution ids, comment), one an action asked.
Asked = list[tuple[str, list[int], str | None]]

POLL_S = 0.05  # how often wait_for looks again: its polling interval, not a wait of its own


def console(dsn: str, **kwargs: Any) -> KestrelConsole:
    kwargs.setdefault("operator", OPERATOR)
    kwargs.setdefault("refresh", 0.5)
    return KestrelConsole(dsn=dsn, **kwargs)


async def wait_for(pilot: Any, predicate: Callable[[], Any], timeout: float = 10.0, what: str = "") -> None:
    """Let the app run until ``predicate()`` holds (AssertionError after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(POLL_S)
    raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")


async def settled(pilot: Any, timeout: float = 10.0) -> list[str]:
    """Wait until the terminal shows the same rows on two frames in a row, each drawn once
    every message and animation is done: the layout has caught up with the data. Returns
    those rows."""
    shown: list[str] = []

    async def same_again() -> bool:
        nonlocal shown
        before = shown
        await pilot.wait_for_scheduled_animations()
        shown = screen_lines(pilot.app)
        return shown == before

    deadline = time.monotonic() + timeout
    while not await same_again():
        if time.monotonic() > deadline:
            raise AssertionError(f"the screen still changed after {timeout} s:\n" + "\n".join(shown))
        await pilot.pause(POLL_S)
    return shown


async def palette_pick(pilot: Any, command: str, typed: str | None = None) -> None:
    """Type ``typed`` (default: ``command``) into the open command palette and press enter once
    its search has finished with ``command`` highlighted, so enter runs that command."""
    palette = pilot.app.screen
    assert isinstance(palette, CommandPalette), f"the palette is not open: {type(palette).__name__}"
    await pilot.press(*(command if typed is None else typed))
    commands = palette.query_one(CommandList)

    def ready() -> bool:
        if any(w.node is palette and not w.is_finished for w in pilot.app.workers):
            return False  # still searching: the list may yet be sorted anew
        option = commands.highlighted_option
        prompt = "" if option is None else getattr(option.prompt, "plain", str(option.prompt))
        return prompt.splitlines()[:1] == [command]  # the title (help text follows it)

    await wait_for(pilot, ready, what=f"the palette to highlight {command!r}")
    await pilot.press("enter")


async def fresh(pilot: Any, screen: LiveScreen | None = None, timeout: float = 10.0) -> LiveScreen:
    """Start a refresh now and wait until it is applied and laid out: the screen then shows
    data read after this call (an older refresh still in flight is dropped)."""
    screen = screen or pilot.app.live_screen()
    assert screen is not None
    before = screen.loads
    screen.refresh_data(force=True)
    await wait_for(pilot, lambda: screen.loads > before, timeout, f"a refresh of {type(screen).__name__}")
    # The data is in the widgets, not yet in the layout: a panel the data widened (the
    # dashboard's counts) was still drawn at its old width, its numbers cut. A pause lets the
    # widgets' messages run and lays the screen out again.
    await pilot.pause()
    return screen


async def focus(pilot: Any, widget: Any, presses: int = 12) -> None:
    """Press tab until ``widget`` has the focus, as an operator does."""
    for _ in range(presses):
        if widget.has_focus:
            return
        await pilot.press("tab")
    assert widget.has_focus, pilot.app.focused


async def open_screen(pilot: Any, key: str, kind: type[S]) -> S:
    """Switch screens with ``key``; returns the screen once a live one shows fresh data."""
    await pilot.press(key)
    screen = pilot.app.screen
    assert isinstance(screen, kind), f"{key!r} opened {type(screen).__name__}, not {kind.__name__}"
    if isinstance(screen, LiveScreen) and screen.REFRESHES:
        await fresh(pilot, screen)
    else:
        await pilot.pause()
    return screen


@asynccontextmanager
async def on_screen(
    dsn: str, key: str, kind: type[S], size: tuple[int, int] = SIZE, **kwargs: Any
) -> AsyncIterator[tuple[KestrelConsole, Any, S]]:
    """The console (``console(dsn, **kwargs)``) running at ``size``, screen ``key`` open and
    showing fresh data: (the app, its pilot, the screen)."""
    tui = console(dsn, **kwargs)
    async with tui.run_test(size=size) as pilot:
        yield tui, pilot, await open_screen(pilot, key, kind)


@asynccontextmanager
async def acting_on(
    dsn: str, key: str, kind: type[S], size: tuple[int, int] = SIZE, **kwargs: Any
) -> AsyncIterator[tuple[KestrelConsole, Any, S, Asked]]:
    """``on_screen``, for a test of the actions a screen's keys ask for: (the app, its pilot,
    the screen, every action asked from then on, as ``record_actions`` records them)."""
    async with on_screen(dsn, key, kind, size, **kwargs) as (tui, pilot, screen):
        yield tui, pilot, screen, record_actions(tui)


async def open_detail(pilot: Any, execution_id: int) -> DetailScreen:
    """The detail screen of ``execution_id``, pushed, showing fresh data."""
    screen = DetailScreen(execution_id)
    await pilot.app.push_screen(screen)
    await fresh(pilot, screen)
    return screen


@asynccontextmanager
async def on_detail(
    dsn: str, execution_id: int, size: tuple[int, int] = SIZE, **kwargs: Any
) -> AsyncIterator[tuple[KestrelConsole, Any, DetailScreen]]:
    """The console running, the detail screen of ``execution_id`` open: (the app, its pilot, the screen)."""
    tui = console(dsn, **kwargs)
    async with tui.run_test(size=size) as pilot:
        yield tui, pilot, await open_detail(pilot, execution_id)


async def enter_opens_detail(pilot: Any) -> DetailScreen:
    """Press enter (on a row naming an execution): the detail screen it opens, showing fresh data."""
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, DetailScreen), what="the detail screen")
    screen = pilot.app.screen
    await fresh(pilot, screen)
    return screen


def rows(db: psycopg.Connection, query: str, params: Any = None) -> list[tuple]:
    return db.execute(query, params).fetchall()


def statuses(db: psycopg.Connection) -> dict[int, str]:
    return dict(rows(db, STATUS_OF))


def pending_gates(db: psycopg.Connection, gates: Iterable[tuple[str, str, dict[str, Any] | None]]) -> list[int]:
    """One execution waiting on each (workflow, gate, details) approval, asked 10, 9, ...
    minutes ago: the Approvals list shows them oldest first, in this order."""
    ids = []
    for i, (workflow, gate, details) in enumerate(gates):
        eid = db.execute(
            "INSERT INTO workflow_executions (workflow_name, status, started_at) "
            "VALUES (%s, 'waiting', now()) RETURNING id",
            (workflow,),
        ).fetchone()[0]
        db.execute(
            "INSERT INTO workflow_waits (execution_id, step_id, kind, created_at, details) "
            "VALUES (%s, %s, 'approval', now() - make_interval(mins => %s), %s)",
            (eid, gate, 10 - i, None if details is None else Jsonb(details)),
        )
        ids.append(eid)
    return ids


def text_of(widget: Any) -> str:
    """The plain text a Static shows."""
    content = widget.content
    return content.plain if hasattr(content, "plain") else str(content)


def record_actions(tui: KestrelConsole) -> Asked:
    """Every action the console's Operator is asked to run, in order (it still runs them).

    A test that declines a confirmation asserts this stays empty once the action workers are
    done: the action's pool opens lazily, so a wrong action could land in the database only
    after a check of the tables alone."""
    calls: Asked = []
    real = tui.operator.run

    def run(action: str, targets: Any, comment: str | None = None) -> Any:
        targets = list(targets)
        calls.append((action, [t.execution_id for t in targets], comment))
        return real(action, targets, comment)

    tui.operator.run = run  # type: ignore[method-assign]
    return calls


def record_pauses(tui: KestrelConsole) -> list[tuple[str, str, bool]]:
    """Every pause or resume of a queue or schedule the console's Operator is asked for, in
    order (it still runs them): what ``record_actions`` is for the execution actions."""
    calls: list[tuple[str, str, bool]] = []
    real = tui.operator.set_paused

    def set_paused(kind: str, name: str, paused: bool) -> str:
        calls.append((kind, name, paused))
        return real(kind, name, paused)

    tui.operator.set_paused = set_paused  # type: ignore[method-assign]
    return calls


async def actions_settled(pilot: Any, screen: Any) -> None:
    """Wait until ``screen`` is on top again (no modal left) and every operator action the
    console started has finished."""
    await wait_for(pilot, lambda: pilot.app.screen is screen, what="the dialog to close")
    await pilot.pause()
    running = [w for w in pilot.app.workers if w.group == "actions"]
    if running:
        await pilot.app.workers.wait_for_complete(running)
    await pilot.pause()


def screen_lines(app: Any) -> list[str]:
    """What the terminal shows now, one string per row (rendered by the compositor)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def footer_text(app: Any) -> str:
    """The footer row as rendered (the key hints an operator can read)."""
    return screen_lines(app)[-1]


MORE_COLUMNS = "→ more columns"


async def says_more_columns(pilot: Any, summary: Any, narrow: bool) -> str:
    """Wait until ``summary`` shows the more-columns sign exactly when the terminal is narrow
    (80 columns cut a wide table's last columns); returns what the terminal shows then."""
    await wait_for(
        pilot, lambda: (MORE_COLUMNS in text_of(summary)) == narrow, what="the more-columns sign to follow the width"
    )
    return "\n".join(screen_lines(pilot.app))


class Summarised(NamedTuple):
    """A screen open at a size, what its summary says and what the terminal shows."""

    tui: KestrelConsole
    pilot: Any
    screen: Any
    summary: Any
    shown: str
    narrow: bool  # 80 columns: a wide table's last columns are cut


@asynccontextmanager
async def summary_at(
    dsn: str, key: str, kind: type[Any], summary_id: str, size: tuple[int, int]
) -> AsyncIterator[Summarised]:
    """Screen ``key`` open at ``size`` once its summary (``summary_id``) shows the more-columns
    sign exactly when the terminal is narrow."""
    narrow = size[0] == 80
    async with on_screen(dsn, key, kind, size=size) as (tui, pilot, screen):
        summary = screen.query_one(summary_id)
        yield Summarised(tui, pilot, screen, summary, await says_more_columns(pilot, summary, narrow), narrow)


async def confirmation(pilot: Any) -> str:
    """Wait for the confirmation dialog; returns its question."""
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmModal), what="the confirmation")
    return pilot.app.screen.question


async def reason_then_confirmation(pilot: Any, reason: str = "") -> str:
    """Answer the comment prompt an action asks first, then wait for its confirmation; returns
    the question."""
    await give_reason(pilot, reason)
    return await confirmation(pilot)


async def answer_h(pilot: Any, answer: str) -> str:
    """Press ``h`` (pause or resume what is under the cursor) and answer its confirmation with
    ``answer``; returns the question it asked."""
    await pilot.press("h")
    question = await confirmation(pilot)
    await pilot.press(answer)
    return question


async def give_reason(pilot: Any, reason: str = "") -> None:
    """Answer the comment prompt every action asks first (its reason, for the audit table)."""
    from kestrel_console.tui.widgets.comment import CommentModal

    await wait_for(pilot, lambda: isinstance(pilot.app.screen, CommentModal), what="the comment prompt")
    if reason:
        await pilot.press(*reason)
    await pilot.press("enter")


def form_labels(screen: Any) -> list[str]:
    """The parameter names the Reports screen's form shows, in order."""
    return [str(label.content).split(" ")[0] for label in screen.query("#rep-form Label")]
