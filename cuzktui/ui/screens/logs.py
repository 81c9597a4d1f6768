"""Logs screen: the raw daemon log, filtered by level or to one job, searchable, following the tail.

The log is the ground truth behind every chart: when the waterfall stalls or the daemon dies,
this is where the operator reads what it said last. The heavy lifting (indexing a file of
millions of lines, searching it) lives in :class:`LogView`; this screen wires keys to it and
shows where the view stands. ``j`` keeps one job's lines: those naming it, and its failure line
when the daemon wrote it without a job id; the job's outcome is said above them, in the daemon's
words.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input, Static

from ...controller import Controller
from ...figures import find_job, job_outcome, unnamed_job_lines
from ...session_layout import DAEMON_LOG
from ..widgets.header import KeysFooter, screen_header
from ..widgets.logview import ALL_LEVELS, JobFilter, Level, LogView


def log_path_of(controller: Controller) -> Path | None:
    """The session's ``daemon.log`` (a launched daemon's log, or the copy of an attached one's log file or
    journal), else the log the model names (a bare log's replay; a session recorded before attached logs
    were copied into it names the file it followed)."""
    session_dir = controller.identity.session_dir
    if session_dir is not None and (session_dir / DAEMON_LOG).exists():
        return session_dir / DAEMON_LOG
    named = controller.model.daemon.log_path or controller.model.log_source
    if named:
        return Path(named)
    return session_dir / DAEMON_LOG if session_dir is not None else None


class LogsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search"),
        Binding("n", "next_match", "Next"),
        Binding("N", "previous_match", "Prev", key_display="N"),
        Binding("f", "toggle_follow", "Follow"),
        Binding("e", "toggle_level('ERROR')", "Error"),
        Binding("w", "toggle_level('WARN')", "Warn"),
        Binding("i", "toggle_level('INFO')", "Info"),
        Binding("d", "toggle_level('DEBUG')", "Debug"),
        Binding("t", "toggle_level('TIMELINE')", "Timeline"),
        Binding("j", "job", "Job"),
        Binding("escape", "close_search", "Close search", show=False),
    ]

    DEFAULT_CSS = """
    LogsScreen {
        #logs-status { height: 1; padding: 0 1; background: $panel; }
        #logs-search, #logs-job { dock: bottom; margin-bottom: 1; display: none; }
        #logs-search.-open, #logs-job.-open { display: block; }
        #logs-job-outcome { height: auto; max-height: 4; padding: 0 1; background: $panel; display: none; }
        #logs-job-outcome.-open { display: block; }
        LogView { height: 1fr; }
    }
    """

    def __init__(self, controller: Controller) -> None:
        super().__init__()
        self.controller = controller
        self.job_id: str | None = None  # the job whose lines alone are shown

    def compose(self) -> ComposeResult:
        yield screen_header(self.app)
        yield Static(id="logs-status")
        yield Static(id="logs-job-outcome")
        yield LogView(log_path_of(self.controller), id="logs-view")
        yield Input(placeholder="search the log (enter: find, n/N: next/previous, esc: close)", id="logs-search")
        yield Input(
            placeholder="one job's lines: its id (enter: show them, empty: every job, esc: close)", id="logs-job"
        )
        yield KeysFooter()

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    def on_mount(self) -> None:
        self.view.focus()
        self._show_status()

    def refresh_from_model(self) -> None:
        """Pick up a new log path (a daemon launched later) and whatever the log gained."""
        path = log_path_of(self.controller)
        view = self.view
        if path != view.path:
            view.set_path(path)
        view.poll()
        if self.job_id is not None:
            self._filter_job()  # the job may have ended since, by a line that names no job

    def _filter_job(self) -> None:
        """Keep the chosen job's lines and say how it stands, from the model."""
        outcome = self.query_one("#logs-job-outcome", Static)
        if self.job_id is None:
            self.view.set_job(None)
            outcome.remove_class("-open")
            return
        job = find_job(self.controller.model, self.job_id)
        self.view.set_job(JobFilter(self.job_id, unnamed_job_lines(job) if job is not None else ()))
        text = Text.assemble(("job ", "bold"), (self.job_id, "bold"), ": ")
        if job is None:
            text.append("not in the model; the lines naming it are shown")
        elif (said := job_outcome(job)) is not None:
            what, why = said
            text.append(what, "bold")
            text.append(f" — {why}")
            if job.failed_by is not None:
                text.append("  (its line names no job: shown by its time and text)", "dim")
        else:
            text.append(job.status)
        outcome.update(text)
        outcome.add_class("-open")

    # ---- actions ------------------------------------------------------------------------

    def action_search(self) -> None:
        search = self.query_one("#logs-search", Input)
        search.add_class("-open")
        search.focus()

    def action_job(self) -> None:
        field = self.query_one("#logs-job", Input)
        field.value = self.job_id or ""
        field.add_class("-open")
        field.focus()

    def action_close_search(self) -> None:
        for field in self.query("#logs-search, #logs-job").results(Input):
            field.remove_class("-open")
        self.view.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_close_search()
        if event.input.id == "logs-job":
            self.job_id = event.value.strip() or None
            self._filter_job()
            self._show_status()
            return
        self.view.search(event.value.strip(), forward=True)

    def action_next_match(self) -> None:
        self.view.search(self.view.needle, forward=True)

    def action_previous_match(self) -> None:
        self.view.search(self.view.needle, forward=False)

    def action_toggle_follow(self) -> None:
        self.view.follow = not self.view.follow

    def action_toggle_level(self, name: str) -> None:
        level = Level[name]
        shown = self.view.levels_shown
        self.view.set_levels(shown - {level} if level in shown else shown | {level})

    # ---- status line ----------------------------------------------------------------------

    def on_log_view_updated(self, _: LogView.Updated) -> None:
        self._show_status()

    def on_log_view_search_done(self, message: LogView.SearchDone) -> None:
        if message.error is not None:
            self.notify(message.error, severity="error")
        elif message.line is None:
            self.notify(f"{message.needle!r} not found", severity="warning")

    def _show_status(self) -> None:
        view = self.view
        status = self.query_one("#logs-status", Static)
        if view.path is None:
            status.update("No daemon log yet: start the daemon (or open a session).")
            return
        shown = view.levels_shown
        count = f"{view.line_count:,} lines"
        if shown != ALL_LEVELS or view.job_filter is not None:
            count = f"{view.row_count:,} of {count}"
        if view.job_filter is not None:
            count += f" (job {view.job_filter.job_id})"
        line = Text.assemble(str(view.path), " · ", count, " (indexing…)" if view.indexing else "", " · levels")
        # Said in words, not only by strike-through, which NO_COLOR terminals and many fonts drop.
        for label, levels, style in (
            ("shown", [lv for lv in Level if lv in shown], "bold"),
            ("hidden", [lv for lv in Level if lv not in shown], "dim strike"),
        ):
            if levels:
                line.append(f" {label}:")
                for level in levels:
                    line.append(" ")
                    line.append(level.name, style)
        line.append(" · ")
        line.append("following" if view.follow else "not following (f)", "" if view.follow else "dim")
        if view.needle:
            line.append(f" · search: {view.needle!r}")
        status.update(line)
