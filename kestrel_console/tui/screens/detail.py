"""Screen 3, one execution: the per-step trace, why it is not moving (with the key that fixes
it), its attempts, input, step outputs and error, and the actions its state allows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Header, Static, TabbedContent, TabPane

from kestrel_core import ActionRefused, InvalidArgument, NotFound, first_line
from kestrel_core.lifecycle import ExecutionStatus, WaitState

from ... import formatting as fmt
from ... import style
from ...humanize import duration
from ...safe_text import visible
from ...timeline_model import decider, family_line
from ..live import LiveScreen
from ..operator import NO_INPUT, Target
from ..state_actions import STATE_BINDINGS, StateActions
from ..widgets.banner import Banner
from ..widgets.comment import CommentModal
from ..widgets.confirm import ConfirmModal
from ..widgets.footer import KeyFooter
from ..widgets.json_input import JsonAnswer, JsonModal
from ..widgets.live_table import Column, LiveTable
from ..widgets.timeline import Timeline

ATTEMPT_COLUMNS = [
    Column("n", "#"),
    Column("step"),
    Column("kind"),
    Column("attempt"),
    Column("start"),
    Column("duration"),
    Column("outcome"),
    Column("worker", "worker / decided by"),
    Column("error", "error / comment"),
]
FAMILY_COLUMNS = [Column("relation", "link"), Column("id"), Column("workflow"), Column("status")]
OUTCOME_STYLES = style.STATUS_STYLES  # one palette (style.py)
# Forks the execution from the selected step: means nothing else on any screen.
FORK_KEY = "f"


class DetailScreen(StateActions, LiveScreen):
    VIEW = "detail"
    NAME = "Execution"
    BINDINGS: ClassVar[list[Any]] = [
        *STATE_BINDINGS,
        Binding("a", "approve", "Approve"),
        Binding("x", "reject", "Reject"),
        Binding(FORK_KEY, "fork", "Fork", tooltip="a new execution from the step selected in the Attempts table"),
        Binding("escape", "app.back", "Back", show=False),
        # There is no list here to filter: / goes to the Executions list and opens its filter,
        # so what is typed next is filter text, never this screen's action keys.
        Binding("slash", "filter_list", "Filter the list", show=False, key_display="/"),
    ]
    HELP_EXTRA = [
        ("tab / shift+tab", "move between the trace, the tabs and the tables"),
        ("← →", "switch tab (attempts, input, output, error, steps)"),
        ("enter", "on a parent, child or fork (Linked executions panel): open that execution"),
    ]

    def __init__(self, execution_id: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.execution_id = execution_id
        self.execution: dict[str, Any] | None = None
        self.entries: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        self.blocker: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Banner()
        with VerticalScroll(id="detail-body"):
            yield Static(f"execution {self.execution_id} · loading…", id="detail-head")
            yield Static("", id="detail-blocker")
            yield Timeline(id="detail-timeline")
            with TabbedContent(id="detail-tabs"):
                with TabPane("Attempts", id="tab-attempts"):
                    yield LiveTable(ATTEMPT_COLUMNS, id="detail-attempts", classes="signs-cut")
                with TabPane("Input", id="tab-input"):
                    yield Static("", id="detail-input")
                with TabPane("Output", id="tab-output"):
                    yield Static("", id="detail-output")
                with TabPane("Error", id="tab-error"):
                    yield Static("", id="detail-error")
                with TabPane("Steps", id="tab-steps"):
                    yield Static("", id="detail-steps")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#detail-timeline").border_title = "Timeline (one time axis; ✗ failed attempts, ╌ waits)"
        self.query_one("#detail-blocker").display = False

    @work(thread=True, exclusive=True, group="detail", exit_on_error=False)
    def load(self, seq: int) -> None:
        eid = self.execution_id

        def read(r: Any) -> tuple[Any, ...]:
            execution = r.execution(eid)
            if execution is None:
                return None, [], [], None
            parent = execution["parent_id"]
            # The parent's workflow and state, for its row (None once it is pruned).
            execution["parent"] = r.brief(parent) if parent is not None else None
            return execution, r.timeline(eid), r.steps(eid), r.blocker(eid)

        self.fetch(seq, read, self.show)

    def show(self, data: tuple[Any, ...]) -> None:
        execution, entries, steps, blocker = data
        self.execution, self.entries, self.steps, self.blocker = execution, entries, steps, blocker
        head = self.query_one("#detail-head", Static)
        if execution is None:
            head.update(Text(f"no execution with id {self.execution_id} (pruned, or never existed)", style="bold red"))
            return
        self.sub_title = f"execution {self.execution_id}"
        head.update(_head(execution))
        blocker_box = self.query_one("#detail-blocker", Static)
        blocker_box.display = blocker is not None
        if blocker is not None:
            text = Text("Why isn't it running? ", style="bold yellow")
            text.append(visible(blocker), style="yellow")
            if self.kapp.read_only:
                text.append("  (read-only: actions disabled)", style="dim")
            blocker_box.update(text)
        now = execution["created_at"] + timedelta(seconds=execution["age_s"] or 0)
        self._show_family(execution)
        self.query_one(Timeline).show(execution, entries, now)
        self._show_attempts(execution, entries)
        self.query_one("#detail-input", Static).update(fmt.json_view(execution["input"]))
        self.query_one("#detail-output", Static).update(
            fmt.json_view(execution["output"])
            if execution["output"] is not None
            else Text("no output yet" if execution["status"] != ExecutionStatus.SUCCESS else "null", style="dim")
        )
        self.query_one("#detail-error", Static).update(fmt.error_view(execution["error"]))
        self.query_one("#detail-steps", Static).update(_steps_view(steps))
        self.selection_changed()

    def _show_family(self, execution: dict[str, Any]) -> None:
        """One row for the parent and one per child, each opened with enter."""
        rows = []
        if execution["parent_id"] is not None:
            parent = execution.get("parent") or {"id": execution["parent_id"], "workflow": "", "status": "pruned"}
            rows.append(("parent", parent))
        rows += [("child", c) for c in execution.get("children") or []]
        # A fork runs the same workflow; its state is on its own screen (enter).
        workflow = execution["workflow_name"]
        origin = execution.get("forked_from")
        if origin:
            rows.append((f"forked from, at {origin['step']}", {"id": origin["id"], "workflow": workflow, "status": ""}))
        rows += [(f"fork, from {f['step']}", {"id": f["id"], "workflow": workflow, "status": ""})
                 for f in execution.get("forks") or []]  # fmt: skip
        if not self.is_attached or (not rows and not self.query("#detail-family")):
            return
        if not self.query("#detail-family"):
            # Mounted only for an execution that has a parent or children: a hidden table on
            # every detail screen made leaving it slower, and keys typed right after `/` (the
            # list's filter text) reached the list before its filter line opened.
            family = LiveTable(FAMILY_COLUMNS, id="detail-family")
            family.border_title = "Linked executions: parent, children, forks (enter opens)"
            self.query_one("#detail-body").mount(family, after="#detail-blocker")
        family = self.query_one("#detail-family", LiveTable)
        if not family.columns:
            # Mounted, its columns not added yet (its on_mount): filled from its own queue,
            # which runs after its mount; the screen's next refresh may come before that.
            family.call_later(self._show_family, execution)
            return
        family.display = bool(rows)
        family.sync(
            (
                str(link["id"]),
                {
                    "relation": relation,
                    "id": str(link["id"]),
                    "workflow": link["workflow"],
                    "status": fmt.status(link["status"]),
                },
                link,
            )
            for relation, link in rows
        )

    def _show_attempts(self, execution: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        t0 = execution.get("started_at") or execution["created_at"]
        rows = []
        for n, e in enumerate(entries, 1):
            step = e["kind"] == "step"
            took = e["duration_s"]
            rows.append(
                (
                    f"{e['kind']}:{e['step_id']}:{e['attempt'] or 0}",
                    {
                        "n": str(n),
                        "step": e["step_id"],
                        "kind": e["kind"],
                        "attempt": str(e["attempt"]) if step else "",
                        "start": "+" + duration((e["started_at"] - t0).total_seconds(), compact=True, clamp=True),
                        "duration": duration(took, compact=True, clamp=True) if took is not None else "…",
                        "outcome": Text(e["outcome"] or "", style=OUTCOME_STYLES.get(e["outcome"] or "", "")),
                        "worker": (e["owner_id"] if step else decider(e)) or "",
                        "error": ((e["error"] or "").splitlines()[-1][:100] if e["error"] else "")
                        if step
                        else (e["comment"] or ""),
                    },
                    e,
                )
            )
        self.query_one("#detail-attempts", LiveTable).sync(rows, sort_column="n", sort_value=int)

    # -- actions ------------------------------------------------------------------------------

    def _target(self, step_id: str | None = None) -> list[Target]:
        e = self.execution
        if e is None:
            return []
        return [Target(self.execution_id, e["workflow_name"], e["status"], step_id=step_id)]

    def current_status(self, target: Target) -> str | None:
        e = self.execution
        if e is None:
            return None
        if target.step_id is not None and self.pending_gate() != target.step_id:
            return None  # the gate was decided elsewhere
        return e["status"]

    def action_rows(self) -> list[dict[str, Any]]:
        e = self.execution
        if e is None:
            return []
        expired = (
            e["status"] == ExecutionStatus.RUNNING
            and e["lease_expires"] is not None
            and e["lease_expires"] < e["created_at"] + timedelta(seconds=e["age_s"] or 0)
        )
        return [
            {
                "id": self.execution_id,
                "status": e["status"],
                "lease_expired": expired,
                "pending_gate": self.pending_gate(),
            }
        ]

    def pending_gate(self) -> str | None:
        for e in self.entries:
            if e["kind"] == "approval" and e["outcome"] == WaitState.WAITING:
                return e["step_id"]
        return None

    def targets(self) -> list[Target]:
        return self._target()

    def _decide(self, action: str) -> None:
        gate = self.pending_gate()
        if gate is None:
            self.kapp.tell(
                f"execution {self.execution_id} has no approval gate waiting for a decision", severity="warning"
            )
            return
        self.act(action, self._target(gate))

    def action_approve(self) -> None:
        self._decide("approve")

    def action_reject(self) -> None:
        self._decide("reject")

    # -- fork ---------------------------------------------------------------------------------

    def selected_step(self) -> str | None:
        """The step under the Attempts table's cursor (the fork starts there)."""
        entry = self.query_one("#detail-attempts", LiveTable).cursor_data()
        return entry["step_id"] if entry else None

    def action_fork(self) -> None:
        """Reason, then new input (optional JSON), then y/n naming both ids; then the fork."""
        e, eid = self.execution, self.execution_id
        if self.kapp.read_only:
            self.kapp.refuse_read_only("fork")
            return
        step = self.selected_step()
        if e is None or step is None:
            self.kapp.tell(
                f"nothing to fork from: execution {eid} has no step yet (choose one in the Attempts table)",
                severity="warning",
            )
            return
        title = f"Fork execution {eid} from step {step!r}"

        def with_reason(comment: str | None) -> None:
            if comment is None:  # escape
                return
            prompt = "New input for the fork, as JSON (edit the origin's below):"
            modal = JsonModal(title, prompt, value=fmt.json_line(e["input"]), empty_means=f"the input of {eid}")
            self.app.push_screen(modal, lambda answer: with_input(comment or None, answer))

        def with_input(comment: str | None, answer: JsonAnswer | None) -> None:
            if answer is None:
                return
            new_input = answer.value if answer.given and answer.value != e["input"] else NO_INPUT
            self._confirm_fork(step, comment, new_input)

        prompt = f"Reason to fork execution {eid} from step {step!r} (optional):"
        self.app.push_screen(CommentModal(title, prompt, placeholder="why"), with_reason)

    def _confirm_fork(self, step: str, comment: str | None, new_input: Any) -> None:
        eid = self.execution_id
        said = "the origin's" if new_input is NO_INPUT else f"new: {fmt.short_json(new_input, 200)}"
        question = (
            f"Fork execution {eid} from step {step!r} as a new execution?\n"
            f"The steps before {step!r} keep their checkpoints; {step!r} and every step after it run again "
            f"in the new execution ({visible(self.execution['workflow_name'] if self.execution else '')}). "
            f"Input: {said}. Recorded as {self.kapp.config.operator!r}."
            + (f" Comment: {comment!r}." if comment else "")
        )

        def done(yes: bool | None) -> None:
            if yes:
                self.perform_fork(step, comment, new_input)

        self.app.push_screen(ConfirmModal(question, title=f"Fork execution {eid}"), done)

    @work(thread=True, group="actions", exit_on_error=False)
    def perform_fork(self, step: str, comment: str | None, new_input: Any) -> None:
        try:
            new_id = self.kapp.operator.fork(self.execution_id, step, input=new_input, comment=comment)
        except (ActionRefused, NotFound, InvalidArgument) as exc:
            self._to_ui(self.kapp.tell, first_line(exc), severity="warning")  # the engine's reason, one line
            return
        except Exception as exc:
            self._to_ui(self.kapp.action_failed, "fork", exc)
            return
        self._to_ui(self._forked, new_id)

    def _forked(self, new_id: int) -> None:
        eid = self.execution_id
        self.kapp.tell(f"forked {eid} → {new_id}")
        self.refresh_data(force=True)

        def open_it(yes: bool | None) -> None:
            if yes:
                self.app.push_screen(DetailScreen(new_id))

        question = f"Forked {eid} → {new_id}: execution {new_id} is enqueued.\nOpen execution {new_id} now?"
        self.app.push_screen(ConfirmModal(question, title=f"forked {eid} → {new_id}"), open_it)

    async def action_filter_list(self) -> None:
        await self.kapp.action_show("executions")
        open_filter = getattr(self.app.screen, "action_filter", None)  # the Executions screen's
        if open_filter is not None:
            open_filter()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.data_table.id == "detail-family" and event.row_key.value is not None:
            self.app.push_screen(DetailScreen(int(event.row_key.value)))


def _head(e: dict[str, Any]) -> Text:
    text = Text(f"execution {e['id']}  ", style="bold")
    text.append(visible(e["workflow_name"]), style="bold cyan")
    text.append("  ")
    text.append_text(fmt.status(e["status"]))
    if e["duration_s"] is not None:
        text.append(f"  ran {duration(e['duration_s'], compact=True, clamp=True)}")
    text.append("\n")
    meta = [f"created {fmt.when(e['created_at'])} ({duration(e['age_s'], compact=True, clamp=True)} ago)"]
    if e["started_at"]:
        meta.append(f"started {fmt.when(e['started_at'])}")
    if e["finished_at"]:
        meta.append(f"finished {fmt.when(e['finished_at'])}")
    if e["owner_id"]:
        meta.append(f"owner {visible(e['owner_id'])}")
    if e["lease_expires"] and e["status"] == ExecutionStatus.RUNNING:
        meta.append(f"lease until {fmt.when(e['lease_expires'])}")
    meta.append(f"claims {e['claims']}")
    if e["priority"]:
        meta.append(f"priority {e['priority']}")
    if e["idempotency_key"]:
        meta.append(f"key {visible(e['idempotency_key'])}")
    text.append(" · ".join(meta), style="dim")
    links = family_line(e)
    if links:
        text.append("\n" + links, style="cyan")
    return text


def _steps_view(steps: list[dict[str, Any]]) -> Group | Text:
    if not steps:
        return Text("no step has finished yet", style="dim")
    parts: list[Any] = []
    for s in steps:
        head = Text(visible(s["step_id"]), style="bold")
        head.append(
            f"  {s['attempts']} attempt{'s' if s['attempts'] != 1 else ''} · "
            f"{duration(s['duration_s'], compact=True, clamp=True)} · {visible(s['owner_id'] or '')}",
            style="dim",
        )
        parts.append(head)
        parts.append(fmt.error_view(s["error"]) if s["error"] else fmt.json_view(s["output"]))
        parts.append(Text(""))
    return Group(*parts)
