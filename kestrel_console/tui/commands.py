"""The ``ctrl+p`` command palette: go to a screen, run a saved report, change the refresh, or
act on the selection of the current screen (actions are left out in --read-only mode)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from .config import REFRESH_PRESETS

SCREEN_ACTIONS = [
    ("requeue", "Re-enqueue the marked executions (or the one under the cursor)"),
    ("cancel", "Cancel the marked executions (or the one under the cursor)"),
    ("approve", "Approve the marked gates (or the one under the cursor)"),
    ("reject", "Reject the marked gates (or the one under the cursor)"),
]


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
                    title = help_text.split(" (")[0]
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
