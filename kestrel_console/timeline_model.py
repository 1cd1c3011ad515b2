"""The timeline of one execution, headless: lanes, segments and one time axis.

Computed from the Reader's timeline rows (``read/timeline.py``: one row per step attempt and
per wait, ordered by start), with no Rich and no Textual, so the CLI's table (``show``,
``cli/timeline_view.py``) and the TUI's trace (``tui/widgets/timeline.py``) place every bar the
same way and differ only in how they draw it.

- A ``Segment`` is one attempt or one wait: where its bar starts and ends.
- A ``Lane`` is one step with all its attempts, or one wait.
- A ``Trace`` holds the lanes and the axis [t0, t1] and maps times to character columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kestrel_core.lifecycle import AttemptOutcome

from .safe_text import visible

MIN_SPAN = timedelta(milliseconds=1)  # an axis is never empty: a 0 ms execution still draws


@dataclass(frozen=True)
class Segment:
    """One step attempt or one wait on the axis."""

    start: datetime
    end: datetime | None  # None: still running / still waiting
    outcome: str
    attempt: int | None = None
    error: str | None = None
    due: datetime | None = None  # a pending sleep: when it wakes (its bar reaches there)

    def bar_end(self, now: datetime) -> datetime:
        """Where the bar stops: the end, else a pending sleep's due time, else now."""
        return self.end or self.due or now


def segment(entry: Mapping[str, Any]) -> Segment:
    """The segment of one timeline row."""
    end = entry.get("finished_at")
    due = entry.get("wake_at") if entry.get("kind") == "sleep" and end is None else None
    return Segment(
        start=entry["started_at"],
        end=end,
        outcome=entry.get("outcome") or "",
        attempt=entry.get("attempt"),
        error=entry.get("error"),
        due=due,
    )


@dataclass
class Lane:
    """One row of the trace: a step and its attempts, or one wait."""

    step_id: str
    kind: str  # step | approval | sleep | child | event
    segments: list[Segment] = field(default_factory=list)
    entry: Mapping[str, Any] | None = None  # the wait's row (waits only)

    @property
    def attempts(self) -> int:
        return len(self.segments) if self.kind == "step" else 0

    @property
    def failed(self) -> int:
        return sum(1 for s in self.segments if s.outcome == AttemptOutcome.ERROR) if self.kind == "step" else 0

    def took(self, now: datetime) -> float:
        """Seconds from the first start to the last end (or now, while it lasts)."""
        return ((self.segments[-1].end or now) - self.segments[0].start).total_seconds()


def build_lanes(entries: Sequence[Mapping[str, Any]]) -> list[Lane]:
    """Lanes in the order their first entry started (the Reader's timeline order)."""
    lanes: dict[tuple[str, str], Lane] = {}
    for e in entries:
        kind = e["kind"]
        key = ("step" if kind == "step" else "wait", e["step_id"])
        lane = lanes.get(key)
        if lane is None:
            lane = lanes[key] = Lane(step_id=e["step_id"], kind=kind, entry=None if kind == "step" else e)
        lane.segments.append(segment(e))
    return list(lanes.values())


def axis_span(
    execution: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], now: datetime
) -> tuple[datetime, datetime]:
    """The time axis: from the execution's start (or first entry) to its end (or now, or
    when a pending sleep is due if that is later)."""
    segments = [segment(e) for e in entries]
    t0 = min([execution.get("started_at") or execution["created_at"], *(s.start for s in segments)])
    ends = [s.end or s.due for s in segments if s.end or s.due]
    end = execution.get("finished_at")
    if end is None or any(s.end is None for s in segments):
        end = max(now, end or now)
    return t0, max([end, *ends, t0 + MIN_SPAN])


def bar_cols(start: datetime, end: datetime, t0: datetime, t1: datetime, width: int) -> tuple[int, int]:
    """[left, right) character columns of a bar for [start, end] on the axis [t0, t1] drawn
    ``width`` wide. Every bar gets at least one column, so a 1 ms step is still seen."""
    span = max((t1 - t0).total_seconds(), 1e-6)
    left = int((start - t0).total_seconds() / span * width)
    right = int(round((end - t0).total_seconds() / span * width))
    left = min(width - 1, max(0, left))
    return left, min(width, max(left + 1, right))


UNAUDITED = "UNAUDITED: no operator action records this decision"


def decider(entry: Mapping[str, Any]) -> str:
    """Who decided an approval: the name given, then the database role that acted
    ('alice (db role ops_login)'); the name alone is only a claim. A decision no operator
    action records (written outside decide_approval) says so: its names prove nothing."""
    name = visible(entry.get("decided_by") or "")
    role = entry.get("decided_by_db_user")
    who = f"{name} (db role {visible(role)})" if role else name
    return f"{who} [{UNAUDITED}]" if entry.get("audited") is False else who


def family_line(execution: Mapping[str, Any], limit: int = 20) -> str:
    """``parent #N · children: #a success, #b running · forked from #M at step s · forks: #f
    (from s2)`` (empty when it has none of these)."""
    parts = []
    if execution.get("parent_id") is not None:
        parts.append(f"parent #{execution['parent_id']}")
    origin = execution.get("forked_from")
    if origin:
        parts.append(f"forked from #{origin['id']} at step {visible(origin['step'])}")
    forks = execution.get("forks") or []
    if forks:
        shown = ", ".join(f"#{f['id']} (from {visible(f['step'])})" for f in forks[:limit])
        more = f", … {len(forks) - limit} more" if len(forks) > limit else ""
        parts.append(f"forks ({len(forks)}): {shown}{more}")
    kids = execution.get("children") or []
    if kids:
        shown = ", ".join(f"#{c['id']} {c['status']}" for c in kids[:limit])
        more = f", … {len(kids) - limit} more" if len(kids) > limit else ""
        parts.append(f"children ({len(kids)}): {shown}{more}")
    return " · ".join(parts)


@dataclass(frozen=True)
class Trace:
    """One execution's timeline laid on one axis, at the database's ``now``."""

    execution: Mapping[str, Any]
    entries: list[Mapping[str, Any]]
    lanes: list[Lane]
    t0: datetime
    t1: datetime
    now: datetime

    @property
    def span_s(self) -> float:
        """The axis, in seconds."""
        return (self.t1 - self.t0).total_seconds()

    @property
    def elapsed_s(self) -> float:
        """The execution from its start to its end (or now)."""
        return ((self.execution.get("finished_at") or self.now) - self.t0).total_seconds()

    def cols(self, seg: Segment, width: int) -> tuple[int, int]:
        """[left, right) columns of a segment's bar."""
        return bar_cols(seg.start, seg.bar_end(self.now), self.t0, self.t1, width)

    def attempts_of(self, step_id: str) -> int:
        """How many attempts a step has had (the N of "attempt n/N"); 0 if none."""
        return max(
            (e.get("attempt") or 0 for e in self.entries if e["kind"] == "step" and e["step_id"] == step_id), default=0
        )

    def offset_s(self, entry: Mapping[str, Any]) -> float:
        """Seconds from the axis start to the entry's start."""
        return (entry["started_at"] - self.t0).total_seconds()


def trace(execution: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], now: datetime) -> Trace:
    """The model both renderers draw: lanes and the axis of one execution's timeline rows."""
    rows = list(entries)
    t0, t1 = axis_span(execution, rows, now)
    return Trace(execution=execution, entries=rows, lanes=build_lanes(rows), t0=t0, t1=t1, now=now)
