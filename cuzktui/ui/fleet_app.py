"""``cuzk-tui fleet``: one table of many boxes, rendered from :class:`cuzktui.fleet.FleetMonitor`'s views.

The poll runs in a thread worker and never overlaps itself (a one-shot timer is re-armed when it ends),
so a box that does not answer delays nothing: the table keeps showing the last views meanwhile.
"""

from __future__ import annotations

import subprocess
from typing import ClassVar

from textual import work
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from ..fleet import COLUMNS, SORT_KEYS, BoxView, FleetMonitor, row_cells, sort_views
from .widgets.header import KeysFooter


class FleetApp(App[None]):
    TITLE = "cuzk fleet"
    CSS = """
    #fleet-status { height: 1; padding: 0 1; }
    DataTable { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "next_sort", "Sort"),
        Binding("r", "reverse_sort", "Reverse"),
        Binding("enter", "open_box", "Open dashboard", priority=True),
        Binding("q", "quit", "Quit", id="quit"),
    ]

    def __init__(self, monitor: FleetMonitor, *, poll_interval: float = 2.0, source_label: str = "") -> None:
        super().__init__()
        self.monitor = monitor
        self.poll_interval = poll_interval
        self.source_label = source_label
        self.sort_key = "name"
        self.descending = False
        self.polls = 0
        self._shown: list[BoxView] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="fleet-status")
        table: DataTable[str] = DataTable(cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table
        yield KeysFooter()

    def on_mount(self) -> None:
        self._render_views(self.monitor.views)
        self._poll()

    @work(thread=True, exclusive=True, group="fleet-poll")
    def _poll(self) -> None:
        views = self.monitor.poll()
        self.call_from_thread(self._polled, views)

    def _polled(self, views: list[BoxView]) -> None:
        self.polls += 1
        self._render_views(views)
        self.set_timer(self.poll_interval, self._poll)

    def _render_views(self, views: list[BoxView]) -> None:
        table = self.query_one(DataTable)
        cursor = self._shown[table.cursor_row].box.name if self._shown and table.cursor_row < len(self._shown) else None
        self._shown = sort_views(views, self.sort_key, self.descending)
        table.clear()
        for view in self._shown:
            table.add_row(*row_cells(view), key=view.box.name)
        if cursor is not None:
            names = [v.box.name for v in self._shown]
            table.move_cursor(row=names.index(cursor) if cursor in names else 0)
        up = sum(1 for v in views if v.state == "up")
        order = "descending" if self.descending else "ascending"
        self.query_one("#fleet-status", Static).update(
            f"{self.source_label}  {up}/{len(views)} up  sorted by {self.sort_key} ({order})"
        )

    def row_of(self, name: str) -> tuple[str, ...]:
        """The cells shown for box ``name`` (what the operator reads)."""
        table = self.query_one(DataTable)
        return tuple(str(cell) for cell in table.get_row(name))

    def action_next_sort(self) -> None:
        self.sort_key = SORT_KEYS[(SORT_KEYS.index(self.sort_key) + 1) % len(SORT_KEYS)]
        self._render_views(self.monitor.views)

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self._render_views(self.monitor.views)

    def action_open_box(self) -> None:
        table = self.query_one(DataTable)
        if not self._shown or table.cursor_row >= len(self._shown):
            return
        command = self.monitor.open_command(self._shown[table.cursor_row])
        if isinstance(command, str):
            self.notify(command, title="Open", severity="warning")
            return
        try:
            with self.suspend():
                subprocess.run(list(command), check=False)
        except SuspendNotSupported:
            self.notify(f"run it yourself: {' '.join(command)}", title="Open", severity="warning")
        except OSError as error:
            self.notify(f"{command[0]}: {error}", title="Open", severity="error")
