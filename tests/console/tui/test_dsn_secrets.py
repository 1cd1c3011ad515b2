"""The TUI started on a malformed DSN, or one whose server is down, says so without the
password: in the banner, the header and every notice (issue 9)."""

from __future__ import annotations

import pytest

from tests.hostile_text import MALFORMED_DSNS, SECRET

from .helpers import SIZE, console, screen_lines, wait_for


@pytest.mark.parametrize(
    "dsn",
    [
        *MALFORMED_DSNS,
        f"host=127.0.0.1 port=1 user=bob password={SECRET}",  # well formed, server down
    ],
)
async def test_the_tui_never_shows_the_password(dsn: str) -> None:
    tui = console(dsn)
    async with tui.run_test(size=SIZE) as pilot:
        # The banner shows the problem from its own message queue, a moment after it is known.
        await wait_for(pilot, lambda: "database unreachable" in "\n".join(screen_lines(tui)), what="the banner")
        shown = ["\n".join(screen_lines(tui)), tui.title, tui.sub_title, repr(tui.db_problem), repr(tui.notices)]
        for key in "234567":  # every screen, the banner follows
            await pilot.press(key)
            await wait_for(pilot, lambda: "unreachable" in "\n".join(screen_lines(tui)), what=f"screen {key}")
            shown.append("\n".join(screen_lines(tui)))
        assert "database unreachable" in shown[0]
        assert not any(SECRET in text for text in shown), [t for t in shown if SECRET in t][0]
        await pilot.press("ctrl+q")
