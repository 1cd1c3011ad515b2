"""The per-step trace view of one execution: every attempt and wait as a bar on one time axis.

One lane per step (its attempts side by side, failed ones red, the backoff between them
dotted) and one per wait (a dashed gap labelled with its kind: approval or sleep), under an
overview lane where the whole execution reads left to right.

The Textual renderer of the timeline model (``timeline_model``: lanes, axis, where each bar
sits); the CLI's ``show`` draws the same model as a table (``cli/timeline_view.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.text import Text
from textual.widget import Widget

from kestrel_core.lifecycle import AttemptOutcome, WaitState

from ... import formatting as fmt
from ... import style
from ...humanize import duration
from ...safe_text import literal, visible
from ...timeline_model import Lane, Segment, Trace, bar_cols, decider, trace

STEP_STYLES = style.COLOURS  # one palette with the CLI and the rest of the TUI
WAIT_STYLES = style.WAIT_COLOURS
WAIT_MARKS = {"approval": "◇ ", "sleep": "☾ ", "child": "⇉ ", "event": "⚑ "}
# A lane whose last attempt is open or was ended by its claim says so in words.
OPEN_OR_CUT = (AttemptOutcome.RUNNING, AttemptOutcome.CANCELLED, AttemptOutcome.ABANDONED)
STEP_MARKS = {"success": "✓", "error": "✗", "running": "▶", "cancelled": "⊘", "abandoned": "⊘", "paused": "⏸"}
BAR = "█"
RUNNING = "▒"
RETRY_GAP = "·"
WAIT = "╌"
INFO_WIDTH = 40
MIN_BAR = 10
EDGES = "││ "  # what a row spends besides the label, the bars and the info


def lane_info(lane: Lane, now: datetime) -> str:
    """What a lane's right-hand column says."""
    last = lane.segments[-1]
    took = duration(lane.took(now), compact=True, clamp=True)
    if lane.kind == "step":
        mark = STEP_MARKS.get(last.outcome, "?")
        tries = f"{lane.attempts} attempts" if lane.attempts > 1 else "1 attempt"
        failed = f", {lane.failed} failed" if lane.failed else ""
        state = f"{last.outcome} " if last.outcome in OPEN_OR_CUT else ""
        return f"{mark} {state}{tries}{failed} · {took}"
    e = lane.entry or {}
    outcome = e.get("outcome") or ""
    if outcome in (WaitState.APPROVED, WaitState.REJECTED):
        by = f" by {decider(e)}" if e.get("decided_by") or e.get("audited") is False else ""
        return f"{lane.kind}: {outcome}{by} · {took}"
    if outcome == WaitState.WAITING:
        until = f" until {fmt.when(e.get('wake_at'))}" if e.get("wake_at") else ""
        return f"{lane.kind}: waiting {took}{until}"
    return f"{lane.kind}: {outcome.replace('_', ' ')} · {took}"


class _Canvas:
    """One lane's characters and styles, bars placed by the model on ``width`` columns."""

    def __init__(self, width: int, model: Trace) -> None:
        self.width = width
        self.model = model
        self.chars = [" "] * width
        self.styles = [""] * width

    def fill(
        self, start: datetime, end: datetime, char: str, style: str, *, label: str = "", under: bool = False
    ) -> None:
        left, right = bar_cols(start, end, self.model.t0, self.model.t1, self.width)
        for i in range(left, right):
            if under and self.chars[i] != " ":
                continue
            self.chars[i], self.styles[i] = char, style
        if label and right - left >= len(label) + 2:
            at = left + (right - left - len(label)) // 2
            for j, ch in enumerate(label):
                self.chars[at + j], self.styles[at + j] = ch, style + " bold"

    def segment(self, seg: Segment, char: str, style: str, **kwargs: Any) -> None:
        self.fill(seg.start, seg.bar_end(self.model.now), char, style, **kwargs)

    def text(self) -> Text:
        out = Text()
        for ch, look in zip(self.chars, self.styles):
            out.append(ch, style=look or None)
        return out


def render_lines(model: Trace, *, width: int) -> list[Text]:
    """The trace as lines of text: axis, overview lane, then one lane per step and wait.

    Every line is exactly one terminal row at ``width`` (columns counted in cells, so wide
    characters count twice; a line never wraps): the widget's height is its number of lines,
    and no lane is ever pushed out of it."""
    lanes, now = model.lanes, model.now
    if not lanes:
        return [Text("no step has started yet", style="dim")]
    label_w = min(26, max(cell_len(_label(lane)) for lane in lanes + [Lane("execution", "all")]) + 1)
    head_info = f"{model.execution.get('status', '')} · {duration(model.elapsed_s, compact=True, clamp=True)}"
    infos = [head_info] + [lane_info(lane, now) for lane in lanes]
    # The bars get most of the width: the info column never takes more than 2/5 of what the
    # labels leave (at 80 columns the bars had 18 and the info 41).
    info_w = min(INFO_WIDTH, max(cell_len(i) for i in infos), max(16, (width - label_w) * 2 // 5))
    bar_w = max(MIN_BAR, width - label_w - info_w - len(EDGES))
    info_w = max(1, min(info_w, width - label_w - bar_w - len(EDGES)))
    lines = [_axis(label_w, bar_w, model)]

    overview = _Canvas(bar_w, model)
    for lane in lanes:
        if lane.kind == "step":
            for seg in lane.segments:
                overview.segment(seg, BAR if seg.end else RUNNING, STEP_STYLES.get(seg.outcome, ""))
    for lane in lanes:  # waits go in the gaps between steps, labelled with their kind
        if lane.kind != "step":
            overview.segment(lane.segments[0], WAIT, WAIT_STYLES.get(lane.kind, ""), label=lane.kind, under=True)
    lines.append(_row("execution", label_w, overview.text(), head_info, info_w, bold=True))

    for lane, info in zip(lanes, infos[1:]):
        canvas = _Canvas(bar_w, model)
        if lane.kind == "step":
            for prev, seg in zip(lane.segments, lane.segments[1:]):
                if prev.end is not None and seg.start > prev.end:
                    canvas.fill(prev.end, seg.start, RETRY_GAP, "dim")
            for seg in lane.segments:
                canvas.segment(seg, BAR if seg.end else RUNNING, STEP_STYLES.get(seg.outcome, ""))
        else:
            canvas.segment(lane.segments[0], WAIT, WAIT_STYLES.get(lane.kind, ""), label=lane.kind)
        lines.append(_row(_label(lane), label_w, canvas.text(), info, info_w))
    for line in lines:
        line.no_wrap, line.overflow = True, "ellipsis"  # one row each, whatever was miscounted
    return lines


def _label(lane: Lane) -> str:
    if lane.kind == "step":
        return visible(lane.step_id)
    return WAIT_MARKS.get(lane.kind, "☾ ") + visible(lane.step_id)


def _fit(text: str, width: int, style: str = "", *, pad: bool = False) -> Text:
    """``text`` in at most ``width`` cells, cut with an ellipsis (padded to ``width``); its
    control characters as escapes (literally shown, as everywhere)."""
    out = literal(text, style=style)
    out.truncate(width, overflow="ellipsis", pad=pad)
    return out


def _row(label: str, label_w: int, bar: Text, info: str, info_w: int = INFO_WIDTH, *, bold: bool = False) -> Text:
    line = _fit(label, label_w, "bold" if bold else "", pad=True)
    line.append("│", style="dim")
    line.append_text(bar)
    line.append("│ ", style="dim")
    line.append_text(_fit(info, info_w, "bold" if bold else ""))
    return line


def _axis(label_w: int, bar_w: int, model: Trace) -> Text:
    span = model.span_s
    marks = [" "] * bar_w
    for frac in (0.0, 0.25, 0.5, 0.75):
        text = "+" + duration(span * frac, compact=True, clamp=True) if frac else fmt.when(model.t0)
        at = int(frac * bar_w)
        if all(c == " " for c in marks[max(0, at - 1) : at + len(text) + 1]) and at + len(text) <= bar_w:
            marks[at : at + len(text)] = list(text)
    end = "+" + duration(span, compact=True, clamp=True)
    if all(c == " " for c in marks[bar_w - len(end) - 1 :]):
        marks[bar_w - len(end) :] = list(end)
    line = Text(" " * label_w, style="dim")
    line.append("│" + "".join(marks) + "│", style="dim")
    return line


class Timeline(Widget):
    """Shows the trace of the execution given to ``show``; redraws to its width."""

    DEFAULT_CSS = """
    Timeline { height: auto; padding: 0 1; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model: Trace | None = None

    @property
    def lanes(self) -> list[Lane]:
        return self.model.lanes if self.model else []

    def show(self, execution: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], now: datetime) -> None:
        self.model = trace(execution, entries, now)
        self.refresh(layout=True)

    def lines(self, width: int | None = None) -> list[Text]:
        if self.model is None:
            return [Text("loading…", style="dim")]
        return render_lines(self.model, width=width or self.size.width or 100)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> RenderableType:
        return Group(*self.lines(self.content_size.width or None))
