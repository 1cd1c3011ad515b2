"""A bulk action on the Executions list's filter, with the CLI's exact, frozen
preview: ``b`` asks which action (cancel, requeue, pause, resume) and why, then freezes the ids
the filter selects now through kestrel_core (``bulk_freeze``: a token) and shows their exact
count, their statuses and a sample in a confirmation; ``y`` acts with that token on exactly
those ids (``bulk_apply``, in a worker thread, its progress on the line above the list), never
on the filter evaluated again; the summary says how many were done and how many refused, by
reason. ``n`` does nothing (the token expires unused)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from textual import work
from textual.widgets import Static

from kestrel_core import ActionRefused, InvalidArgument, NotFound, first_line
from kestrel_core.admin import BULK_ACTIONS, BULK_MAX_ROWS, Preview, Progress

from ..read import Reader
from ..read.search import ExecutionFilter
from .live import ScreenMixin
from .operator import VERBS
from .widgets.choice import ChoiceModal
from .widgets.comment import CommentModal
from .widgets.confirm import ConfirmModal

# The key that previews a bulk action on the filter: means nothing else on any screen.
BULK_KEY = "b"
# The actions offered in bulk from the list, in this order (fork needs a step: the CLI's).
OFFERED = ("cancel", "requeue", "pause", "resume")
SAMPLE = 10
# The preview reads every id the filter selects, up to BULK_MAX_ROWS: longer than a refresh.
FREEZE_TIMEOUT_MS = 30_000


def counts(rows: list[dict[str, Any]]) -> str:
    """``running 1,200, enqueued 800``: how many selected rows are in each status now."""
    return ", ".join(f"{status} {n:,}" for status, n in Counter(r["status"] for r in rows).most_common())


def question(action: str, preview: Preview, rows: list[dict[str, Any]], where: str, operator: str,
             comment: str | None) -> str:  # fmt: skip
    """What the confirmation asks: the exact count, the statuses, a sample, the rule, the token."""
    verb = VERBS[action][0]
    sample = ", ".join(str(r["id"]) for r in rows[:SAMPLE]) + (", …" if len(rows) > SAMPLE else "")
    said = f" Comment: {comment!r}." if comment else ""
    return (
        f"{verb} {preview.total:,} execution{'s' if preview.total != 1 else ''} selected by {where}?\n"
        f"Now: {counts(rows)}.\n"
        f"Ids (newest first): {sample}\n"
        f"{verb} acts on {BULK_ACTIONS[action].acts_on}; any other is refused and reported, one by one.\n"
        f"Frozen under token {preview.token}: exactly these {preview.total:,} ids, never the filter "
        f"evaluated again. Recorded as {operator!r}.{said}"
    )


def summary(result: Progress, reasons: list[dict[str, Any]]) -> str:
    """The result: done and refused, the refusals by reason (with example ids)."""
    lines = [
        f"{result.action} {result.token}: {result.done:,} {BULK_ACTIONS[result.action].past}, "
        f"{result.refused:,} refused, {result.left:,} left (of {result.total:,})"
    ]
    for r in reasons:
        examples = ", ".join(str(i) for i in r["examples"])
        lines.append(f"refused {r['n']:,}: {r['reason']} (e.g. {examples})")
    return "\n".join(lines)


class BulkFlow(ScreenMixin):
    """The Executions screen's ``b``: needs ``filter`` (the filter applied) and ``#exec-bulk``."""

    filter: ExecutionFilter
    bulk_line: str = ""  # the last progress or summary shown (tests read it)

    def action_bulk(self) -> None:
        if self.kapp.read_only:
            self.kapp.refuse_read_only("bulk")
            return
        f = self.filter
        if f.empty:
            self.kapp.tell(
                "bulk action: apply a filter first (/); it acts on exactly the executions the filter selects",
                severity="warning",
            )
            return
        where = f.describe()
        choices = [(a, f"{VERBS[a][0]}: acts on {BULK_ACTIONS[a].acts_on}") for a in OFFERED]

        def chosen(action: str | None) -> None:
            if action is None:
                return
            prompt = f"Reason to {VERBS[action][0].lower()} every execution {where} selects (optional):"

            def with_reason(comment: str | None) -> None:
                if comment is not None:  # None: escape
                    self.bulk_freeze(action, f, comment or None)

            self.app.push_screen(CommentModal(f"Bulk {action}", prompt, placeholder="why"), with_reason)

        title = "Bulk action on the filter"
        prompt = f"Act on every execution selected by {where}: first a preview of the exact ids, then y/n."
        self.app.push_screen(ChoiceModal(title, prompt, choices), chosen)

    @work(thread=True, group="actions", exit_on_error=False)
    def bulk_freeze(self, action: str, f: ExecutionFilter, comment: str | None) -> None:
        cfg = self.kapp.config
        where = f.describe()
        try:
            with Reader(cfg.dsn, schema=cfg.schema, statement_timeout_ms=FREEZE_TIMEOUT_MS) as reader:
                rows = reader.selected(f, limit=BULK_MAX_ROWS + 1)
            if not rows:
                self._to_ui(self.kapp.tell, f"no execution matches {where}: nothing to {action}", severity="warning")
                return
            if len(rows) > BULK_MAX_ROWS:
                self._to_ui(
                    self.kapp.tell,
                    f"the filter selects more than {BULK_MAX_ROWS:,} executions: narrow it (since:, from:/until:)",
                    severity="warning",
                )
                return
            preview = self.kapp.operator.bulk_freeze(action, [r["id"] for r in rows], str(f))
        except (ActionRefused, NotFound, InvalidArgument) as exc:
            self._to_ui(self.kapp.tell, first_line(exc), severity="warning")
            return
        except Exception as exc:
            self._to_ui(self.kapp.action_failed, "bulk", exc)
            return
        self._to_ui(self._confirm_bulk, action, preview, rows, where, comment)

    def _confirm_bulk(
        self, action: str, preview: Preview, rows: list[dict[str, Any]], where: str, comment: str | None
    ) -> None:
        asked = question(action, preview, rows, where, self.kapp.config.operator, comment)

        def done(yes: bool | None) -> None:
            if yes:
                self._show_bulk(f"{action} {preview.token}: starting on {preview.total:,} executions…")
                self.bulk_apply(action, preview, comment)
            else:
                self.kapp.tell(f"nothing done: the preview {preview.token} is left unused (it expires)")

        title = f"Bulk {action}: {preview.total:,} execution{'s' if preview.total != 1 else ''}"
        self.app.push_screen(ConfirmModal(asked, title=title), done)

    @work(thread=True, group="actions", exit_on_error=False)
    def bulk_apply(self, action: str, preview: Preview, comment: str | None) -> None:
        past = BULK_ACTIONS[action].past

        def progress(p: Progress) -> None:
            line = f"{action} {p.token}: {p.total - p.left:,} of {p.total:,} ({past} {p.done:,}, refused {p.refused:,})"
            self._to_ui(self._show_bulk, line)

        try:
            result, reasons = self.kapp.operator.bulk_apply(preview.token, action, comment, progress)
        except (ActionRefused, NotFound, InvalidArgument) as exc:
            self._to_ui(self.kapp.tell, first_line(exc), severity="warning")
            return
        except Exception as exc:
            self._to_ui(self.kapp.action_failed, "bulk", exc)
            self._to_ui(self._show_bulk, f"{action} {preview.token} cut short: apply it again to resume (CLI: "
                        f"kestrel-console {action} --token {preview.token})")  # fmt: skip
            return
        self._to_ui(self._bulk_done, result, reasons)

    def _bulk_done(self, result: Progress, reasons: list[dict[str, Any]]) -> None:
        said = summary(result, reasons)
        self._show_bulk(said.splitlines()[0])
        self.kapp.tell(said, severity="warning" if result.refused else "information")
        self.refresh_data(force=True)

    def _show_bulk(self, line: str) -> None:
        self.bulk_line = line
        box = self.query_one("#exec-bulk", Static)
        box.display = True
        box.update(line)
