"""Screen 5, saved reports: the shipped ones and the user's folders, a form for the chosen
report's parameters, its result in a table, and export of that result to CSV."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Header, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from kestrel_core import DatabaseUnavailable, first_line

from ...safe_text import literal, visible
from ..adhoc_session import AdhocSession
from ..config import ADHOC_MAX_ROWS
from ..export import export_result
from ..live import LiveScreen
from ..widgets.banner import Banner
from ..widgets.footer import KeyFooter
from ..widgets.results import ResultsTable, summary


class ReportsScreen(LiveScreen):
    VIEW = "reports"
    NAME = "Reports"
    REFRESHES = False  # runs when asked, not on a timer
    BINDINGS: ClassVar[list[Any]] = [
        Binding("ctrl+r,f5", "run", "Run", priority=True, key_display="^r"),
        Binding("ctrl+s", "export", "Export", priority=True, key_display="^s"),
        Binding("ctrl+l", "reload", "Reload", key_display="^l"),
    ]
    HELP_EXTRA = [
        ("enter (list)", "choose the report and fill in its parameters"),
        ("enter (last parameter)", "run the report"),
        ("enter (result row)", "open the execution its execution_id or id column names"),
        ("tab / shift+tab", "move between the list, the parameters and the result"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reports: dict[str, Any] = {}
        self.broken: list[Exception] = []
        self.report: Any = None  # the chosen Report
        self.param_inputs: dict[str, Input] = {}
        self.result: Any = None
        self.message = ""
        self.session: AdhocSession | None = None
        self._pending_select: str | None = None
        self._pending_run = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Banner()
        with Horizontal(id="rep-top"):
            yield OptionList(id="rep-list")
            with Vertical(id="rep-right"):
                yield Static("", id="rep-about")
                yield VerticalScroll(id="rep-form")
                yield Button("Run (ctrl+r)", id="rep-run", variant="primary", compact=True)
        yield Static("", id="rep-status")
        yield Static("", id="rep-notice")
        yield ResultsTable(id="rep-results")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.session = AdhocSession(self.kapp.config, application_name="kestrel-console report")
        self.kapp.track_session(self.session)
        self.query_one("#rep-list").border_title = "Reports"
        self.query_one("#rep-right").border_title = "Parameters"
        self.action_reload()

    def _say(self, text: str, style: str = "") -> None:
        text = visible(text, newlines=True)  # database errors quote values
        self.message = text
        self.query_one("#rep-status", Static).update(Text(text, style=style))

    # -- the list ---------------------------------------------------------------------------------

    def action_reload(self) -> None:
        self.discover_reports()

    @work(thread=True, exclusive=True, group="reports-discover", exit_on_error=False)
    def discover_reports(self) -> None:
        from kestrel_console.reports import ReportError, discover

        broken: list[ReportError] = []
        try:
            found = discover(self.kapp.config.queries, broken=broken)
        except Exception as exc:  # a --queries folder that does not exist
            self._to_ui(self._say, str(exc), "bold red")
            found = {}
            try:
                found = discover((), broken=broken)
            except Exception:
                pass
        self._to_ui(self._listed, found, broken)

    def _listed(self, found: dict[str, Any], broken: list[Exception]) -> None:
        self.reports, self.broken = found, broken
        options = self.query_one("#rep-list", OptionList)
        options.clear_options()
        for name, report in found.items():
            tag = Text("" if report.shipped else " (yours)", style="dim")
            options.add_option(Option(literal(name) + tag, id=name))
        if broken:
            self._say("; ".join(first_line(b) for b in broken), "yellow")
        wanted = self._pending_select or (self.report.name if self.report else None)
        if wanted in found:
            self.select_report(wanted, run=self._pending_run)
        elif found:
            self.select_report(next(iter(found)))

    def select_report(self, name: str, *, run: bool = False) -> None:
        """Choose a report and build its parameter form; ``run`` (the command palette): run
        it at once with its defaults. Another report's rows never stay under this heading."""
        if name not in self.reports:
            self._pending_select = name  # the list is still loading
            self._pending_run = run
            return
        self._pending_select = None
        if self.report is not None and self.report.name != name:
            self._clear_result()
        self.report = report = self.reports[name]
        options = self.query_one("#rep-list", OptionList)
        index = options.get_option_index(name)
        if options.highlighted != index:
            options.highlighted = index
        about = literal(report.name, style="bold")
        about.append(f"  ({'shipped' if report.shipped else report.path})\n", style="dim")
        about.append(report.description or "no description", style="")
        self.query_one("#rep-about", Static).update(about)
        form = self.query_one("#rep-form", VerticalScroll)
        form.remove_children()
        self.param_inputs = {}
        widgets: list[Any] = []
        if not report.params:
            widgets.append(Static(Text("no parameters", style="dim")))
        for p in report.params:
            # One row per parameter (label, then the value, pre-filled with the default), so
            # every declared parameter stays in sight at 80x24.
            label = f"{p.name} ({p.type}{', required' if p.required else ''})"
            box = Input(
                value=p.default_text or "",
                placeholder="null" if p.default is None and not p.required else p.type,
                classes="rep-param",
                compact=True,
            )
            self.param_inputs[p.name] = box
            widgets.append(Horizontal(Label(literal(label)), box, classes="rep-row"))
        form.mount_all(widgets)
        if run:
            self.call_after_refresh(self.action_run)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        # select_report moves the highlight itself, and each move comes back here later as a
        # message. Two reports chosen before the first message came back (the palette's
        # choice right after the list's own first pick) chose each other again for ever,
        # rebuilding the form each time, until the console hung. A message about a
        # highlight the list no longer has is stale.
        if event.option_index != event.option_list.highlighted:
            return
        if event.option.id and (self.report is None or self.report.name != event.option.id):
            self.select_report(event.option.id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.select_report(event.option.id)
            first = next(iter(self.param_inputs.values()), None)
            (first or self.query_one("#rep-run", Button)).focus()

    # -- running ----------------------------------------------------------------------------------

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        inputs = list(self.param_inputs.values())
        if inputs and event.input is inputs[-1]:
            self.action_run()
        elif event.input in inputs:
            inputs[inputs.index(event.input) + 1].focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "rep-run":
            self.action_run()

    def action_run(self) -> None:
        from kestrel_console.reports import bind_params

        if self.report is None:
            self._say("choose a report first", "yellow")
            return
        assert self.session is not None
        given = {name: box.value for name, box in self.param_inputs.items() if box.value.strip() != ""}
        try:
            params = bind_params(self.report, given)
        except Exception as exc:  # ReportError: which parameter, what it expects
            self._say(str(exc), "bold red")
            return
        if not self.session.reserve():
            self._say("a report is still running", "yellow")
            return
        self._say(f"running {self.report.name}…", "italic")
        self.execute(self.report, params)

    @work(thread=True, exclusive=True, group="reports", exit_on_error=False)
    def execute(self, report: Any, params: dict[str, Any]) -> None:
        from kestrel_console.reports import run_report

        session = self.session
        assert session is not None
        try:
            result = session.run(lambda conn: run_report(conn, report, params, **session.limits()))
        except Exception as exc:
            self._to_ui(self._failed_report, exc)
            return
        self._to_ui(self._show_result, report, result)

    def _clear_result(self) -> None:
        self.result = None
        table = self.query_one(ResultsTable)
        table.clear(columns=True)
        table.result = None
        self._say("ctrl+r runs the report", "dim")

    def _show_result(self, report: Any, result: Any) -> None:
        if self.report is None or report.name != self.report.name:
            return  # another report was chosen while this one ran
        self.result = result
        self.kapp.db_ok()
        self.query_one(ResultsTable).show(result)
        self._say(f"{report.name}: {summary(result, ADHOC_MAX_ROWS)}", "green")
        # Layer 3 weaker than promised (superuser login, no reader role): say so, apart.
        notice = getattr(result, "notice", None) or ""
        self.query_one("#rep-notice", Static).update(Text(notice, style="yellow"))

    def _failed_report(self, exc: Exception) -> None:
        if isinstance(exc, DatabaseUnavailable):
            self.kapp.db_failed(exc)
        reason = getattr(exc, "reason", None)
        self._say(f"refused: {reason}" if reason else f"error: {first_line(exc)}", "bold red")

    def on_results_table_open_execution(self, event: ResultsTable.OpenExecution) -> None:
        from .detail import DetailScreen

        self.app.push_screen(DetailScreen(event.execution_id))

    def action_export(self) -> None:
        export_result(self, self.result, self.report.name if self.report else "report")
