"""Short text blocks of ``show`` and ``status``: each approval gate's decision, a summary of
the pending approvals (a long list belongs to ``report pending-approvals``), and the workers
(live ones in a table, stopped ones on one line)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from .. import formatting, render
from ..humanize import duration
from ..safe_text import visible
from ..timeline_model import UNAUDITED

# status shows this many of the oldest pending approvals, one line each.
PENDING_SHOWN = 5
# ... and names this many of the workers that stopped within the hour.
STOPPED_NAMED = 5
ALL_PENDING_COMMAND = "kestrel-console report pending-approvals"


def print_decisions(con: Console, timeline: Sequence[Mapping[str, Any]]) -> None:
    """One line per approval gate of an execution: decision, who, when, and their comment."""
    gates = [t for t in timeline if t.get("kind") == "approval"]
    if not gates:
        return
    con.print()
    con.print(Text("approvals", style="bold"))
    for gate in gates:
        line = Text(f"{visible(str(gate['step_id']))}  ")
        decision = gate.get("decision")
        if decision is None and gate.get("finished_at") is None:
            line.append("pending", style="yellow")
            line.append(f" since {formatting.short_time(gate['started_at'])}")
        elif decision is None:
            line.append(str(gate.get("outcome") or "closed"), style="dim")
            line.append(f" at {formatting.short_time(gate['finished_at'])}")
        else:
            line.append(decision, style="green" if decision == "approved" else "red")
            if gate.get("decided_by"):
                line.append(f" by {visible(str(gate['decided_by']))}")
                if gate.get("decided_by_db_user"):
                    line.append(f" (db role {visible(str(gate['decided_by_db_user']))})")
            if gate.get("audited") is False:
                line.append(f" [{UNAUDITED}]", style="bold red")
            if gate.get("finished_at") is not None:
                line.append(f" at {formatting.short_time(gate['finished_at'])}")
            comment = gate.get("comment")
            line.append(
                ": " + formatting.json_line(comment) if comment else ": (no comment)", style="" if comment else "dim"
            )
        con.print(line)


def print_pending_approvals(
    con: Console, pending: Sequence[Mapping[str, Any]], count: int, oldest_age_s: float | None
) -> None:
    """The pending approvals in a few lines: how many, the oldest, the few oldest one line each,
    and the command that lists them all."""
    title = Text("Pending approvals", style="bold")
    if not count:
        con.print(title + Text(": none", style="dim"))
        return
    title.append(f": {count}, oldest waiting {duration(oldest_age_s, clamp=True)}", style="bold")
    con.print(title)
    for row in pending[:PENDING_SHOWN]:
        details = "" if row.get("details") is None else formatting.json_line(row["details"])
        line = Text(
            f"  #{row['execution_id']}  {visible(str(row['workflow_name']))}  {visible(str(row['step_id']))}  "
            f"waiting {duration(row['waiting_s'], clamp=True)}"
        )
        if row.get("deadline") is not None:
            line.append(f"  deadline {formatting.short_time(row['deadline'])}")
        if details:
            line.append(f"  {details}", style="dim")
        con.print(line, no_wrap=True, overflow="ellipsis", crop=True)
    more = count - min(count, PENDING_SHOWN)
    lead = f"  … and {more} more; all of them: " if more else "  all of them, with details: "
    con.print(Text(lead, style="dim") + Text(ALL_PENDING_COMMAND))


def print_workers(con: Console, workers: Sequence[Mapping[str, Any]]) -> None:
    """Live workers in a table (state: alive, late when its heartbeat is overdue, silent);
    those that stopped or went silent within the hour (a demo's earlier runs, restarts) on one
    line after it, unless they still hold executions."""
    shown = [w for w in workers if w["alive"] or w["held"]]
    gone = [w for w in workers if not (w["alive"] or w["held"])]
    render.emit(
        shown,
        ["worker_id", "hostname", "pid", "state", "held", "concurrency", "heartbeat_age_s", "workflows"],
        "table",
        title="Workers",
        empty="no live worker",
        console=con,
        headers={
            "worker_id": "worker",
            "hostname": "host",
            "concurrency": "slots",
            "heartbeat_age_s": "last heartbeat",
        },
    )
    if gone:
        names = ", ".join(visible(str(w["worker_id"])) for w in gone[:STOPPED_NAMED])
        more = f" and {len(gone) - STOPPED_NAMED} more" if len(gone) > STOPPED_NAMED else ""
        con.print(
            Text(f"{len(gone)} stopped or silent in the last hour: {names}{more}", style="dim"),
            no_wrap=True,
            overflow="ellipsis",
            crop=True,
        )
