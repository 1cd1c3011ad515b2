"""The ``ctrl+p`` command palette: go to a screen, run a saved report, change the refresh, or
act on the selection of the current screen, named ("Re-enqueue execution 42"; actions are left
out in --read-only mode)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..safe_text import visible
from .allowed import allows
from .config import REFRESH_PRESETS
from .operator import VERBS

SCREEN_ACTIONS = [
    ("requeue", "Re-enqueue the marked executions (or the one under the cursor)"),
    ("cancel", "Cancel the marked executions (or the one under the cursor)"),
    ("approve", "Approve the marked gates (or the one under the cursor)"),
    ("reject", "Reject the marked gates (or the one under the cursor)"),
]


def _rows(screen: Any) -> list[dict[str, Any]] | None:
    try:
        return screen.action_rows()
    except Exception:  # a screen whose widgets are not there yet: no names, the generic title
        return None


def action_title(action: str, rows: list[dict[str, Any]] | None) -> str | None:
    """The palette's title of ``action`` on the selection, naming it: "Re-enqueue execution
    42", "Approve gate 'deploy' of execution 7", "Cancel the 3 marked executions"; None when
    the screen does not say what it would act on."""
    if not rows:
        return None
    verb = VERBS[action][0]
    rows = [r for r in rows if allows(action, r)]
    gates = action in ("approve", "reject")
    if len(rows) == 1:
        one = rows[0]
        if gates:
            return f"{verb} gate {visible(repr(one['pending_gate']))} of execution {one['id']}"
        return f"{verb} execution {one['id']}"
    return f"{verb} the {len(rows)} marked {'gates' if gates else 'executions'}"


class KestrelCommands(Provider):
    """Screens, reports, refresh settings and actions, as palette commands."""

    def commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app: Any = self.app
        out: list[tuple[str, Callable[[], Any], str]] = []
        from .registry import SCREENS

        for entry in SCREENS:
            out.append((f"Go to {entry.label}", partial(app.action_show, entry.mode), f"screen {entry.key}"))
        for name, report in sorted(app.report_index.items()):
            out.append((f"Report: {name}", partial(app.open_report, name), report.description or "saved report"))
        out.append(("Refresh now", app.action_refresh_now, "re-read the current screen"))
        out.append(("Pause / resume refresh", app.action_toggle_pause, "p"))
        for preset in REFRESH_PRESETS:
            out.append((f"Refresh every {preset:g} s", partial(app.set_refresh, preset), "refresh rate preset"))
        if not app.read_only:
            screen = self.screen
            for action, help_text in SCREEN_ACTIONS:
                # Only what the row's state allows, as in the footer (allowed.py).
                if hasattr(screen, f"action_{action}") and getattr(screen, "offers", lambda _: True)(action):
                    title = action_title(action, _rows(screen)) or help_text.split(" (")[0]
                    out.append((title, partial(screen.run_action, action), help_text))
        return out

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in self.commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)

    async def discover(self) -> Hits:
        for title, callback, help_text in self.commands():
            yield DiscoveryHit(title, callback, help=help_text)
