"""Export a shown query result to a CSV file: ask where (a default name in the current
folder), then write it off the UI thread with ``kestrel_console.reports.write_csv``."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from textual.screen import Screen

from .widgets.comment import CommentModal


def default_path(stem: str) -> Path:
    return Path.cwd() / f"{stem}-{datetime.now():%Y%m%d-%H%M%S}.csv"


def export_result(screen: Screen, result: Any, stem: str) -> None:
    """Ask for a file name, then write ``result`` there as CSV (header row included)."""
    app: Any = screen.app
    if result is None:
        app.tell("nothing to export: run a query first", severity="warning")
        return

    def write(path_text: str | None) -> None:
        if not path_text:
            return
        path = Path(path_text).expanduser()

        def job() -> None:
            from kestrel_console.reports import write_csv

            try:
                n = write_csv(result, path)
            except OSError as exc:
                app.call_from_thread(app.tell, f"cannot write {path}: {exc.strerror or exc}", severity="error")
                return
            app.call_from_thread(app.tell, f"exported {n} row{'s' if n != 1 else ''} to {path}")

        screen.run_worker(job, thread=True, group="export", exit_on_error=False)

    app.push_screen(
        CommentModal("Export to CSV", f"Write the {len(result.rows)} rows shown to:", value=str(default_path(stem))),
        write,
    )
