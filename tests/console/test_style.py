"""One palette (issue 11, cleaner house): a status has the same colour in the CLI, in the TUI's
tables and on the TUI's timeline."""

from __future__ import annotations

from kestrel_console import formatting as fmt
from kestrel_console import style
from kestrel_console.tui.screens import detail
from kestrel_console.tui.widgets import timeline


def test_every_status_has_one_colour_everywhere():
    for name, colour in style.COLOURS.items():
        for styles in (fmt.STATUS_STYLES, detail.OUTCOME_STYLES):
            assert styles[name].split()[-1] == colour, (name, styles[name])
        assert timeline.STEP_STYLES[name] == colour
    assert style.colour("running") == "yellow" and fmt.status("running").style == "bold yellow"
    assert timeline.WAIT_STYLES["approval"] == style.colour("waiting")
