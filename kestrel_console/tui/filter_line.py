"""The ``/`` filter line of a list screen (Executions, Approvals, Audit), the same on each:
hidden until ``/`` opens it holding the filter in force; enter applies what it holds (or says why
not, and the line stays open to be corrected); esc closes it first."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.widgets import Input

from .live import ScreenMixin


class FilterLine(ScreenMixin):
    """Mixed into a list screen that composes ``filter_input`` (an ``Input`` with the id
    ``FILTER_LINE``)."""

    FILTER_LINE: ClassVar[str] = ""
    # What the notice of a refused filter says before the parser's reason.
    FILTER_REFUSED: ClassVar[str] = ""
    filter: Any  # the filter in force, on the screens that keep it as one value

    def filter_input(self, example: str) -> Input:
        """The line to compose, its placeholder an ``example`` filter."""
        return Input(placeholder=f"{example}   (enter applies, esc closes)", id=self.FILTER_LINE)

    def on_mount(self) -> None:
        # The list opens with the line hidden and the table focused now, not by a callback
        # that runs later: the keys typed next land on the table (keys.py).
        self.filter_line.display = False
        self.set_focus(self.table)

    @property
    def filter_line(self) -> Input:
        return self.query_one(f"#{self.FILTER_LINE}", Input)

    def filter_text(self) -> str:
        """The filter in force, as the line shows it when opened."""
        return str(self.filter)

    def read_filter(self, text: str) -> Any:
        """``text`` as this screen's filter; a ValueError says why it is refused."""
        raise NotImplementedError

    def filter_applied(self, wanted: Any) -> None:
        """List what ``wanted`` selects (the line is closed, the table has the focus)."""
        raise NotImplementedError

    def action_filter(self) -> None:
        box = self.filter_line
        box.display = True
        box.value = self.filter_text()
        self.set_focus(box)  # now: the keys typed next go to it (keys.py)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != self.FILTER_LINE:
            return
        event.stop()
        try:
            wanted = self.read_filter(event.value)
        except ValueError as exc:
            self.kapp.tell(f"{self.FILTER_REFUSED}{exc}", severity="error")
            return  # the line stays open with what was typed, to be corrected
        event.input.display = False
        self.set_focus(self.table)
        self.filter_applied(wanted)

    def close_filter_line(self) -> bool:
        """esc's first step: close the line when it is open (True then), the table taking the
        focus back."""
        box = self.filter_line
        if not box.display:
            return False
        box.display = False
        self.set_focus(self.table)
        return True
