"""Sessions screen: recorded sessions, replay one, compare two.

Tuning is a sequence of experiments; the comparison answers "did that knob help, and what did it
cost": throughput and proofs side by side, peak RSS against the memory limit, OOM kills, and the
knobs that differ between the two sessions' last configs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.style import Style
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ...config import diff
from ...controller import Controller
from ...figures import clock_label
from ...units import format_size
from ..messages import OpenReplay
from ..theme import Palette
from ..widgets.header import KeysFooter, screen_header

if TYPE_CHECKING:
    from ...comparison import SessionSummary
    from ...session import SessionInfo


def comparison(a: SessionSummary, b: SessionSummary, palette: Palette) -> Table:
    """Side by side, each column named by its session (time, label, config): the figures, then the knobs
    whose values differ."""

    def peak(s: SessionSummary) -> Text:
        if s.peak_rss_bytes is None:
            return Text("no samples", style="dim")
        text = Text(("≥ " if s.peak_at_least else "") + format_size(s.peak_rss_bytes))
        alarm = palette.fg("phase-failed", bold=True)
        if s.limit_bytes:
            share = s.peak_rss_bytes / s.limit_bytes
            text.append(f" of {format_size(s.limit_bytes)} ({share:.0%})", style=alarm if share > 0.9 else "")
        if s.over_box_ram and s.box_ram_bytes is not None:
            text.append(f" ! above the box's {format_size(s.box_ram_bytes)} RAM", style=alarm + Style(reverse=True))
        text.append(f"\n{s.peak_source}", style="dim")
        return text

    def rate(s: SessionSummary) -> str:
        if s.proofs_per_hour is None:
            return "no finished bench"
        return f"{s.proofs_per_hour:.1f} proofs/hour ({clock_label(s.time_scale)})"

    table = Table(expand=True, show_edge=False)
    table.add_column("", style="dim", no_wrap=True)
    table.add_column(a.title, ratio=1)
    table.add_column(b.title, ratio=1)
    table.add_row("throughput", rate(a), rate(b))
    table.add_row("proofs completed / failed", f"{a.completed} / {a.failed}", f"{b.completed} / {b.failed}")
    table.add_row("OOM kills / bench restarts", f"{a.oom_kills} / {a.restarts}", f"{b.oom_kills} / {b.restarts}")
    table.add_row("peak memory vs limit", peak(a), peak(b))
    table.add_row("config", a.config_name, b.config_name)
    if a.config is not None and b.config is not None:
        changes = diff(a.config, b.config)
        for change in changes:
            table.add_row(Text(change.name, style="bold"), show(change.old), show(change.new))
        if not changes:
            table.add_row("knobs", Text("identical", style="dim"), Text("identical", style="dim"))
    return table


def show(value: Any) -> str:
    return "(unset)" if value is None else str(value)


class SessionsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "open", "Open in replay (or enter)"),
        Binding("space", "mark", "Mark to compare"),
        Binding("c", "compare", "Compare marked"),
        Binding("escape", "close_compare", "Close comparison", show=False),
        Binding("r", "rescan", "Rescan"),
    ]

    DEFAULT_CSS = """
    SessionsScreen {
        #sessions-status { height: 1; padding: 0 1; background: $panel; }
        #sessions-list { height: 1fr; }
        #sessions-compare { height: 2fr; display: none; border-top: solid $panel; padding: 0 1; }
        #sessions-compare.-shown { display: block; }
    }
    """

    def __init__(self, controller: Controller, root: Path | None = None) -> None:
        super().__init__()
        self.controller = controller
        self.root = root
        self.sessions: list[SessionInfo] = []
        self.marked: list[Path] = []

    def compose(self) -> ComposeResult:
        yield screen_header(self.app)
        yield Static("Scanning sessions…", id="sessions-status")
        table: DataTable[str | Text] = DataTable(id="sessions-list", cursor_type="row", zebra_stripes=True)
        table.add_columns("", "label", "created (UTC)", "mode", "proofs", "size", "directory")
        yield table
        yield Static(id="sessions-compare")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.action_rescan()

    def refresh_from_model(self) -> None:
        """Sessions change on disk, not in the model: r rescans."""

    # ---- list ---------------------------------------------------------------------------

    def action_rescan(self) -> None:
        root = self.root

        def work() -> None:
            sessions = self.controller.list_sessions(root)  # reads every session's events file: not on the UI loop
            self.app.call_from_thread(self._show_sessions, sessions)

        self.run_worker(work, thread=True, exclusive=True, group="sessions-scan")

    def _show_sessions(self, sessions: list[SessionInfo]) -> None:
        # Newest first: the session just recorded is the one usually compared.
        self.sessions = sorted(sessions, key=lambda s: (s.created, s.path.name), reverse=True)
        self.marked = [p for p in self.marked if any(s.path == p for s in self.sessions)]
        self._fill_table()
        where = str(self.root) if self.root is not None else "the sessions directory"
        status = f"{len(self.sessions)} session(s) in {where}"
        if not self.sessions:
            status += " — sessions are recorded while the TUI runs a daemon"
        self.query_one("#sessions-status", Static).update(Text(status))

    def _fill_table(self) -> None:
        table: DataTable[str | Text] = self.query_one("#sessions-list", DataTable)
        row = table.cursor_row
        table.clear()
        for s in self.sessions:
            mark = Text(f"{self.marked.index(s.path) + 1}", style="bold reverse") if s.path in self.marked else ""
            created = datetime.fromtimestamp(s.created, UTC).strftime("%Y-%m-%d %H:%M")
            table.add_row(mark, s.label, created, s.mode, s.proofs_text, format_size(s.size_bytes), s.path.name)
        if self.sessions:
            table.move_cursor(row=min(row, len(self.sessions) - 1))

    def _current(self) -> SessionInfo | None:
        row = self.query_one("#sessions-list", DataTable).cursor_row
        return self.sessions[row] if 0 <= row < len(self.sessions) else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    # ---- actions ------------------------------------------------------------------------

    def action_open(self) -> None:
        current = self._current()
        if current is not None:
            self.post_message(OpenReplay(current.path))

    def action_mark(self) -> None:
        current = self._current()
        if current is None:
            return
        if current.path in self.marked:
            self.marked.remove(current.path)
        else:
            self.marked = [*self.marked[-1:], current.path]  # two at most: the older mark drops
        self._fill_table()

    def action_compare(self) -> None:
        if len(self.marked) != 2:
            self.notify("mark two sessions with space first", severity="warning")
            return
        infos = [next(s for s in self.sessions if s.path == p) for p in self.marked]
        panel = self.query_one("#sessions-compare", Static)
        panel.add_class("-shown")

        palette = Palette.for_app(self.app)

        def work() -> None:
            # A week's session takes seconds to read: say which one is being read.
            summaries: list[SessionSummary] = []
            for number, info in enumerate(infos, 1):
                reading = f"Reading session {number} of 2: {info.label} ({format_size(info.size_bytes)})…"
                self.app.call_from_thread(panel.update, Text(reading, style="dim"))
                summaries.append(self.controller.summarize_session(info))
            self.app.call_from_thread(panel.update, comparison(summaries[0], summaries[1], palette))

        self.run_worker(work, thread=True, exclusive=True, group="sessions-compare")

    def action_close_compare(self) -> None:
        self.query_one("#sessions-compare", Static).remove_class("-shown")
