"""WrappingTable: a DataTable whose last column is sentences, wrapped whole at the width left for them.

The Bench screen's notes, Memcheck's reasons and the Tune screen's changes are sentences in the last
column of a table. A fixed-width column wrapped them at its own width, and where the columns together were
wider than the terminal its edge cut every wrapped line: ``… outside the budget was 15`` / ``GiB`` for
158 GiB. Here that column is as wide as the room the other columns leave (at least ``min_width``: below
that the table scrolls sideways, every character still there, and says it is ``cramped`` so that a screen
can show the last cell whole elsewhere), and a change of width wraps every row again.
"""

from __future__ import annotations

from rich.text import Text, TextType
from textual import events
from textual.reactive import var
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

Cell = str | Text


class WrappingTable(DataTable[Cell]):
    """``columns`` as labels; the last wraps. Every row's height follows its wrapped text."""

    # The other columns leave the last one less than ``min_width``: part of it is out of view to the right.
    cramped = var(False)

    DEFAULT_CSS = """
    WrappingTable {
        /* The room is the container's width (not the columns'), and it does not change when enough rows
           arrive to need a vertical scrollbar. */
        width: 100%;
        scrollbar-gutter: stable;
    }
    """

    def __init__(
        self,
        *columns: str,
        min_width: int,
        id: str | None = None,
        zebra_stripes: bool = False,
        one_line_when_cramped: bool = False,
    ) -> None:
        """``one_line_when_cramped``: the screen shows a cramped table's last cell whole elsewhere, so its
        rows keep one line each then (wrapped out of view, the sentence only made rows of blank cells)."""
        super().__init__(id=id, cursor_type="row", zebra_stripes=zebra_stripes)
        self.min_width = min_width
        self.one_line_when_cramped = one_line_when_cramped
        self.add_columns(*columns[:-1])
        self.add_column(columns[-1], width=min_width)
        self._refit_due = False

    def add_row(
        self, *cells: Cell, height: int | None = None, key: str | None = None, label: TextType | None = None
    ) -> RowKey:
        """A row; ``height`` None (the default here) is as many lines as its wrapped cells take."""
        self._refit_due = True
        return super().add_row(
            *cells, height=height if height is not None else self._row_height(), key=key, label=label
        )

    def _row_height(self) -> int | None:
        return 1 if self.cramped and self.one_line_when_cramped else None

    def on_resize(self, _event: events.Resize) -> None:
        self._refit_due = True

    def on_idle(self, _event: events.Idle) -> None:
        # DataTable measures new rows' columns when idle, after this handler: fit once that is done.
        if self._refit_due:
            self._refit_due = False
            self.call_after_refresh(self._refit)

    def room(self) -> int:
        """The width the other columns leave the last one."""
        others = sum(column.get_render_width(self) for column in self.ordered_columns[:-1])
        return self.scrollable_content_region.width - others - 2 * self.cell_padding

    def _refit(self) -> None:
        wrapped = self.ordered_columns[-1]
        room = self.room()
        width, cramped = max(self.min_width, room), room < self.min_width
        if width == wrapped.width and cramped == self.cramped:
            return
        wrapped.width = width
        # A row's height is measured when it is added: every row is added again, to wrap at the new width.
        rows = [(row.key.value, self.get_row(row.key)) for row in self.ordered_rows]
        cursor = self.cursor_row
        self.clear()
        self.cramped = cramped
        for key, cells in rows:
            super().add_row(*cells, height=self._row_height(), key=key)
        if rows:
            self.move_cursor(row=cursor)
