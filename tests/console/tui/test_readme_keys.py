"""The console page's key table (docs/console.md) is the help's, screen by screen, and names the
footer's hints (issue 20): the README said ``1-5 Screens`` while the footer said ``1-7``, and ``p``
for a queue.

Every (key, screen) the help lists from a screen's bindings is a row of the table, and every row
is a binding of that screen or one of the keys its help lists besides (enter, arrows)."""

from __future__ import annotations

import re

import pytest
from textual.binding import Binding

from kestrel_console.tui import KestrelConsole
from kestrel_console.tui.registry import SCREENS
from kestrel_console.tui.screens.detail import DetailScreen
from kestrel_console.tui.screens.help import key_label
from kestrel_console.tui.widgets.comment import CommentModal
from kestrel_console.tui.widgets.confirm import ConfirmModal
from tests.readme_blocks import section

from .helpers import console, footer_text

# The docs' names for the places that have keys: each screen by its NAME, the dialogs.
PLACES = {entry.screen.NAME: entry.screen for entry in SCREENS} | {
    DetailScreen.NAME: DetailScreen,
    "confirmation": ConfirmModal,
    "comment prompt": CommentModal,
}


def console_section() -> str:
    return section("The console", doc="docs/console.md")


def readme_pairs() -> set[tuple[str, str]]:
    """(key, where) of every row of the console page's key table."""
    pairs = set()
    for line in console_section().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("key", "---"):
            continue
        keys = re.findall(r"`([^`]+)`", cells[0])
        for where in (w.strip() for w in cells[1].split(",")):
            pairs |= {(key, where) for key in keys}
    return pairs


def bound(cls: type) -> set[str]:
    return {key_label(b) for b in Binding.make_bindings(cls.BINDINGS) if not b.system}


def help_pairs() -> set[tuple[str, str]]:
    """(key, where) of every binding the help lists: the app's keys anywhere (each number key on
    its own, as the help lists them), each screen's and dialog's own."""
    pairs = {(key, "anywhere") for key in bound(KestrelConsole) if "-" not in key or key == "-"}
    pairs |= {(entry.key, "anywhere") for entry in SCREENS}
    pairs |= {("ctrl+p", "anywhere"), ("ctrl+q", "anywhere")}  # the help's ALWAYS rows
    for where, cls in PLACES.items():
        pairs |= {(key, where) for key in bound(cls)}
    return pairs


def extra_keys(where: str) -> set[str]:
    """The first word of each key a place's help lists besides its bindings (enter, ↑ ↓...)."""
    cls = PLACES.get(where)
    return {key.split()[0] for key, _ in getattr(cls, "HELP_EXTRA", [])}


def test_the_readme_key_table_is_the_help_screen_by_screen():
    readme, helped = readme_pairs(), help_pairs()
    assert helped - readme == set(), "keys the help lists that the docs' table does not"
    unknown = {(k, w) for k, w in readme - helped if k not in extra_keys(w)}
    assert unknown == set(), "rows of the docs' table that are no key of that screen"
    assert {w for _, w in readme} <= set(PLACES) | {"anywhere"}


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_the_footer_hints_are_the_readmes(dsn, size):
    tui = console(dsn)
    async with tui.run_test(size=size) as pilot:
        await pilot.pause()
        hint = re.search(r"(\d-\d) Screens", footer_text(tui))
        assert hint, footer_text(tui)
        assert f"`{hint.group(1)} Screens`" in console_section()
