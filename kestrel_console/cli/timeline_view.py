"""``show`` as a table: one execution's header, then every attempt and wait on one time axis.

The Rich renderer of the timeline model (``timeline_model``): the model places the bars, this
module only writes the columns around them. The TUI draws the same model as lanes
(``tui/widgets/timeline.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import IO, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..formatting import STATUS_STYLES, cut, short_json, short_time
from ..humanize import duration
from ..render import console_for
from ..safe_text import visible
from ..timeline_model import Trace, decider, family_line, segment, trace

BAR_WIDTH = 40
COLUMNS = ("step", "kind", "attempt", "start", "duration", "outcome")


def render_timeline(
    execution: Mapping[str, Any],
    timeline: Sequence[Mapping[str, Any]],
    *,
    now: datetime | None = None,
    width: int | None = None,
    console: Console | None = None,
    file: IO[str] | None = None,
    blocker: str | None = None,
) -> None:
    """Print one execution: its header, then every attempt and wait on one time axis.

    Each line: step, kind, attempt (n/N), start (offset from the execution's start), duration,
    outcome, and a bar scaled to the execution's span, so the slow step stands out.
    """
    con = console or console_for(file)
    _print_header(con, execution, blocker)
    if not timeline:
        con.print(Text("no steps yet", style="dim"))
        return
    model = trace(execution, timeline, now or datetime.now(UTC))
    lines = [_cells(model, entry) for entry in model.entries]
    if width is None:
        # The bar takes what the other columns leave (two spaces between columns, two edges).
        used = sum(max(len(n), *(len(cells[i]) for cells in lines)) for i, n in enumerate(COLUMNS))
        width = max(10, min(BAR_WIDTH * 2, con.width - used - 2 * len(COLUMNS) - 2))
    table = Table(header_style="bold", box=None, pad_edge=False, show_edge=False)
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in ("attempt", "start", "duration") else "left", no_wrap=True)
    table.add_column(f"{duration(model.span_s)} span", no_wrap=True)
    for entry, cells in zip(model.entries, lines):
        left, right = model.cols(segment(entry), width)
        style = STATUS_STYLES.get(entry.get("outcome") or "", "")
        glyph = "█" if entry["kind"] == "step" else "░"
        bar = (
            Text("▕", style="dim")
            + Text(" " * left)
            + Text(glyph * (right - left), style=style)
            + Text(" " * (width - right))
            + Text("▏", style="dim")
        )
        table.add_row(*(Text(c) for c in cells[:5]), Text(cells[5], style=style), bar)
        if entry.get("error"):
            # Under the bar, cut to its width: the table keeps its shape.
            table.add_row("", "", "", "", "", "", Text(" ↳ " + cut(entry["error"], width - 1), style="red"))
    con.print(table)


def _print_header(con: Console, execution: Mapping[str, Any], blocker: str | None) -> None:
    """Id, workflow, status, run time and owner; when it was created, started, finished; its
    parent and children; input, output, error; and why it is blocked."""
    status = execution["status"]
    head = Text()
    head.append(f"execution {execution['id']}", style="bold")
    head.append(f"  {visible(execution['workflow_name'])}  ")
    head.append(status, style=STATUS_STYLES.get(status, ""))
    if execution.get("duration_s") is not None:
        head.append(f"  {duration(execution['duration_s'])}")
    if execution.get("owner_id"):
        head.append(f"  owner {visible(execution['owner_id'])}", style="dim")
    con.print(head)
    created = execution["created_at"]
    line = f"created {short_time(created)}"
    for key in ("started_at", "finished_at"):
        if execution.get(key) is not None:
            line += f"  {key[:-3]} +{duration((execution[key] - created).total_seconds())}"
    con.print(Text(line, style="dim"))
    links = family_line(execution)
    if links:
        con.print(Text(links, style="cyan"))
    con.print(Text("input  ", style="bold") + Text(short_json(execution.get("input"), 200)))
    if execution.get("output") is not None:
        con.print(Text("output ", style="bold") + Text(short_json(execution["output"], 200)))
    if execution.get("error"):
        con.print(Text("error  ", style="bold red") + Text(visible(execution["error"], newlines=True), style="red"))
    if blocker:
        con.print(Text("blocked: ", style="bold yellow") + Text(visible(blocker), style="yellow"))


def _cells(model: Trace, entry: Mapping[str, Any]) -> list[str]:
    """step, kind, attempt (n/N), start (+offset), duration, outcome of one timeline entry."""
    attempt = (
        f"{entry.get('attempt') or '?'}/{model.attempts_of(entry['step_id']) or '?'}" if entry["kind"] == "step" else ""
    )
    if entry.get("finished_at") is None:
        took = duration((model.now - entry["started_at"]).total_seconds()) + "…"
    else:
        took = duration(entry.get("duration_s"))
    outcome = entry.get("outcome") or ""
    if entry["kind"] == "approval" and (entry.get("decided_by") or entry.get("audited") is False):
        outcome = f"{outcome} by {decider(entry)}"
    since_start = model.offset_s(entry)
    return [
        visible(entry["step_id"]),
        entry["kind"],
        attempt,
        ("+" if since_start >= 0 else "") + duration(since_start),
        took,
        outcome,
    ]
