"""The per-step trace view of one execution: every attempt and wait as a bar on one time axis.

One lane per step (its attempts side by side, failed ones red, the backoff between them
dotted) and one per wait (a dashed gap labelled with its kind: approval or sleep), under an
overview lane where the whole execution reads left to right.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual.widget import Widget

from ...render import decider
from ...safe_text import visible
from ... import style
from .. import format as fmt

STEP_STYLES = style.COLOURS  # one palette with the CLI and the rest of the TUI
WAIT_STYLES = style.WAIT_COLOURS
WAIT_MARKS = {"approval": "◇ ", "sleep": "☾ ", "child": "⇉ ", "event": "⚑ "}
BAR = "█"
RUNNING = "▒"
RETRY_GAP = "·"
WAIT = "╌"
INFO_WIDTH = 40


@dataclass
class Segment:
    start: datetime
    end: datetime | None  # None: still running / still waiting
    outcome: str
    attempt: int | None = None
    error: str | None = None


@dataclass
class Lane:
    """One row of the trace: a step and its attempts, or one wait."""

    step_id: str
    kind: str  # step | approval | sleep
    segments: list[Segment] = field(default_factory=list)
    entry: Mapping[str, Any] | None = None  # the wait's row (waits only)

    @property
    def attempts(self) -> int:
        return len(self.segments) if self.kind == "step" else 0

    @property
    def failed(self) -> int:
        return sum(1 for s in self.segments if s.outcome == "error") if self.kind == "step" else 0

    def info(self, now: datetime) -> str:
        """What the lane's right-hand column says."""
        first, last = self.segments[0], self.segments[-1]
        if self.kind == "step":
            took = ((last.end or now) - first.start).total_seconds()
            mark = {"success": "✓", "error": "✗", "running": "▶", "cancelled": "⊘", "abandoned": "⊘"}.get(last.outcome, "?")
            tries = f"{self.attempts} attempts" if self.attempts > 1 else "1 attempt"
            failed = f", {self.failed} failed" if self.failed else ""
            state = f"{last.outcome} " if last.outcome in ("running", "cancelled", "abandoned") else ""
            return f"{mark} {state}{tries}{failed} · {fmt.seconds(took)}"
        e = self.entry or {}
        outcome = e.get("outcome") or ""
        took = fmt.seconds(((last.end or now) - first.start).total_seconds())
        if outcome in ("approved", "rejected"):
            by = f" by {decider(e)}" if e.get("decided_by") else ""
            return f"{self.kind}: {outcome}{by} · {took}"
        if outcome == "waiting":
            until = f" until {fmt.when(e.get('wake_at'))}" if e.get("wake_at") else ""
            return f"{self.kind}: waiting {took}{until}"
        return f"{self.kind}: {outcome.replace('_', ' ')} · {took}"


def build_lanes(entries: Sequence[Mapping[str, Any]]) -> list[Lane]:
    """Lanes in the order their first entry started (the Reader's timeline order)."""
    lanes: dict[tuple[str, str], Lane] = {}
    for e in entries:
        kind = e["kind"]
        key = ("step" if kind == "step" else "wait", e["step_id"])
        lane = lanes.get(key)
        if lane is None:
            lane = lanes[key] = Lane(step_id=e["step_id"], kind=kind, entry=None if kind == "step" else e)
        lane.segments.append(Segment(start=e["started_at"], end=e.get("finished_at"),
                                     outcome=e.get("outcome") or "", attempt=e.get("attempt"),
                                     error=e.get("error")))
    return list(lanes.values())


def _wait_end(entry: Mapping[str, Any]) -> datetime | None:
    """Where a pending sleep's bar ends: when it is due (the axis reaches into the future)."""
    return entry.get("wake_at") if entry.get("kind") == "sleep" else None


def axis_span(execution: Mapping[str, Any], entries: Sequence[Mapping[str, Any]],
              now: datetime) -> tuple[datetime, datetime]:
    """The time axis: from the execution's start (or first entry) to its end (or now, or
    when a pending sleep is due if that is later)."""
    starts = [e["started_at"] for e in entries]
    t0 = min([execution.get("started_at") or execution["created_at"], *starts])
    ends = [e["finished_at"] for e in entries if e.get("finished_at") is not None]
    ends += [_wait_end(e) for e in entries if e.get("finished_at") is None and _wait_end(e)]
    end = execution.get("finished_at")
    if end is None or any(e.get("finished_at") is None for e in entries):
        end = max(now, end or now)
    t1 = max([end, *ends, t0 + timedelta(milliseconds=1)])
    return t0, t1


class _Canvas:
    """One lane's characters and styles, positions on [t0, t1] scaled to ``width``."""

    def __init__(self, width: int, t0: datetime, t1: datetime) -> None:
        self.width = width
        self.t0 = t0
        self.span = max((t1 - t0).total_seconds(), 1e-6)
        self.chars = [" "] * width
        self.styles = [""] * width

    def cols(self, start: datetime, end: datetime) -> tuple[int, int]:
        """[left, right) columns; every segment gets at least one column."""
        left = int((start - self.t0).total_seconds() / self.span * self.width)
        right = int(round((end - self.t0).total_seconds() / self.span * self.width))
        left = min(self.width - 1, max(0, left))
        return left, min(self.width, max(left + 1, right))

    def fill(self, start: datetime, end: datetime, char: str, style: str, *, label: str = "",
             under: bool = False) -> None:
        left, right = self.cols(start, end)
        for i in range(left, right):
            if under and self.chars[i] != " ":
                continue
            self.chars[i], self.styles[i] = char, style
        if label and right - left >= len(label) + 2:
            at = left + (right - left - len(label)) // 2
            for j, ch in enumerate(label):
                self.chars[at + j], self.styles[at + j] = ch, style + " bold"

    def text(self) -> Text:
        out = Text()
        for ch, style in zip(self.chars, self.styles):
            out.append(ch, style=style or None)
        return out


def render_lines(execution: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], *,
                 width: int, now: datetime) -> list[Text]:
    """The trace as lines of text: axis, overview lane, then one lane per step and wait."""
    lanes = build_lanes(entries)
    if not lanes:
        return [Text("no step has started yet", style="dim")]
    t0, t1 = axis_span(execution, entries, now)
    label_w = min(26, max(len(_label(lane)) for lane in lanes + [Lane("execution", "all")]) + 1)
    total = ((execution.get("finished_at") or now) - t0).total_seconds()
    head_info = f"{execution.get('status', '')} · {fmt.seconds(total)}"
    infos = [head_info] + [lane.info(now) for lane in lanes]
    # The bars get most of the width: the info column never takes more than 2/5 of what the
    # labels leave (at 80 columns the bars had 18 and the info 41).
    info_w = min(INFO_WIDTH, max(len(i) for i in infos), max(16, (width - label_w) * 2 // 5))
    bar_w = max(10, width - label_w - info_w - 2)
    lines = [_axis(label_w, bar_w, t0, t1)]

    overview = _Canvas(bar_w, t0, t1)
    for lane in lanes:
        for seg in lane.segments:
            if lane.kind == "step":
                overview.fill(seg.start, seg.end or now, BAR if seg.end else RUNNING,
                              STEP_STYLES.get(seg.outcome, ""))
    for lane in lanes:  # waits go in the gaps between steps, labelled with their kind
        if lane.kind != "step":
            seg = lane.segments[0]
            overview.fill(seg.start, seg.end or _wait_end(lane.entry or {}) or t1, WAIT,
                          WAIT_STYLES.get(lane.kind, ""), label=lane.kind, under=True)
    lines.append(_row("execution", label_w, overview.text(), head_info, info_w, bold=True))

    for lane in lanes:
        canvas = _Canvas(bar_w, t0, t1)
        if lane.kind == "step":
            for prev, seg in zip(lane.segments, lane.segments[1:]):
                if prev.end is not None and seg.start > prev.end:
                    canvas.fill(prev.end, seg.start, RETRY_GAP, "dim")
            for seg in lane.segments:
                canvas.fill(seg.start, seg.end or now, BAR if seg.end else RUNNING,
                            STEP_STYLES.get(seg.outcome, ""))
        else:
            seg = lane.segments[0]
            canvas.fill(seg.start, seg.end or _wait_end(lane.entry or {}) or t1, WAIT,
                        WAIT_STYLES.get(lane.kind, ""), label=lane.kind)
        lines.append(_row(_label(lane), label_w, canvas.text(), lane.info(now), info_w))
    return lines


def _label(lane: Lane) -> str:
    if lane.kind == "step":
        return visible(lane.step_id)
    return WAIT_MARKS.get(lane.kind, "☾ ") + visible(lane.step_id)


def _row(label: str, label_w: int, bar: Text, info: str, info_w: int = INFO_WIDTH, *,
         bold: bool = False) -> Text:
    line = Text(_fit(label, label_w).ljust(label_w), style="bold" if bold else "")
    line.append("│", style="dim")
    line.append_text(bar)
    line.append("│ ", style="dim")
    line.append(_fit(info, info_w), style="bold" if bold else "")
    return line


def _axis(label_w: int, bar_w: int, t0: datetime, t1: datetime) -> Text:
    span = (t1 - t0).total_seconds()
    marks = [" "] * bar_w
    for frac in (0.0, 0.25, 0.5, 0.75):
        text = "+" + fmt.seconds(span * frac) if frac else fmt.when(t0)
        at = int(frac * bar_w)
        if all(c == " " for c in marks[max(0, at - 1): at + len(text) + 1]) and at + len(text) <= bar_w:
            marks[at: at + len(text)] = list(text)
    end = "+" + fmt.seconds(span)
    if all(c == " " for c in marks[bar_w - len(end) - 1:]):
        marks[bar_w - len(end):] = list(end)
    line = Text(" " * label_w, style="dim")
    line.append("│" + "".join(marks) + "│", style="dim")
    return line


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


class Timeline(Widget):
    """Shows the trace of the execution given to ``show``; redraws to its width."""

    DEFAULT_CSS = """
    Timeline { height: auto; padding: 0 1; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.execution: Mapping[str, Any] | None = None
        self.entries: list[Mapping[str, Any]] = []
        self.now: datetime | None = None
        self.lanes: list[Lane] = []

    def show(self, execution: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], now: datetime) -> None:
        self.execution, self.entries, self.now = execution, list(entries), now
        self.lanes = build_lanes(self.entries)
        self.refresh(layout=True)

    def lines(self, width: int | None = None) -> list[Text]:
        if self.execution is None or self.now is None:
            return [Text("loading…", style="dim")]
        return render_lines(self.execution, self.entries, width=width or self.size.width or 100, now=self.now)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> RenderableType:
        return Group(*self.lines(self.content_size.width or None))
