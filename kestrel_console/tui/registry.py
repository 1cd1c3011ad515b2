"""The console's screens, once: each entry's key, mode name, class and label. ``MODES``, the
number-key bindings, the help screen and the command palette are all derived from ``SCREENS``,
so adding a screen (6 Queues, 7 Schedules) is one line here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.binding import Binding

from .screens.approvals import ApprovalsScreen
from .screens.audit import AuditScreen
from .screens.dashboard import DashboardScreen
from .screens.executions import ExecutionsScreen
from .screens.queues import QueuesScreen
from .screens.reports import ReportsScreen
from .screens.schedules import SchedulesScreen
from .screens.sql import SqlScreen


@dataclass(frozen=True)
class ScreenEntry:
    key: str  # the number key that opens it
    mode: str  # the App mode name
    screen: type  # the LiveScreen class
    label: str  # as the help, the palette and the footer say it


SCREENS: list[ScreenEntry] = [
    ScreenEntry("1", "dashboard", DashboardScreen, "Dashboard"),
    ScreenEntry("2", "executions", ExecutionsScreen, "Executions"),
    ScreenEntry("3", "approvals", ApprovalsScreen, "Approvals"),
    ScreenEntry("4", "sql", SqlScreen, "SQL"),
    ScreenEntry("5", "reports", ReportsScreen, "Reports"),
    ScreenEntry("6", "queues", QueuesScreen, "Queues"),
    ScreenEntry("7", "schedules", SchedulesScreen, "Schedules"),
    ScreenEntry("8", "audit", AuditScreen, "Audit"),
]


def modes() -> dict[str, Any]:
    return {entry.mode: entry.screen for entry in SCREENS}


def screen_bindings() -> list[Binding]:
    """One binding per number key; the footer shows them as one hint (``1-5 Screens``) so it
    fits 80 columns, the help lists each."""
    keys = f"{SCREENS[0].key}-{SCREENS[-1].key}"
    return [
        Binding(
            entry.key,
            f"show('{entry.mode}')",
            "Screens" if i == 0 else entry.label,
            show=i == 0,
            key_display=keys if i == 0 else None,
        )
        for i, entry in enumerate(SCREENS)
    ]


def help_rows() -> list[tuple[str, str]]:
    """(key, label) of every screen, for ``?``."""
    return [(entry.key, entry.label) for entry in SCREENS]
