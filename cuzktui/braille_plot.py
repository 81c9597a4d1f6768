"""Line plots as rows of terminal cells: braille dots (2x4 a cell), or one marker a cell in plain mode.

Pure computation, no terminal: a :class:`Plot` (series of (x, value) points, vertical marks, the
window, the size) becomes rows of runs of ``(text, owner)``, where ``owner`` says which series (or
group of marks) a cell belongs to, so the widget colours it, and :data:`AXIS` marks the axis labels
and empty cells. The charts' widget (``cuzktui/ui/widgets/charts.py``) turns rows into styled lines.

What is drawn:

- each series as a run of dots in each dot column, from the smallest to the largest of its samples
  there (a peak is never lost: the sample before an OOM kill is the one that matters), joined to
  the next column's samples by a straight line of dots, except across a gap in the samples: samples
  more than :data:`GAP_FACTOR` times the series' usual spacing apart, with an empty dot column
  between them, are left unjoined;
- a ``scatter`` series as its marker character in each point's cell, never joined;
- a mark (an OOM kill, an eviction) as a vertical line in its column, under the series;
- the y axis labelled at the top, middle and bottom (sizes through :func:`cuzktui.units.format_size`),
  the x axis on the last row at its start, middle and end (elapsed time, or numbers in ``x_unit``).

A cell crossed by several series shows all their dots and belongs to the last one drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .units import GiB, format_duration, format_size

Point = tuple[float, float]
Run = tuple[str, int]  # consecutive cells of one owner
Row = tuple[Run, ...]

AXIS: Final = -1  # the owner of labels and empty cells
GAP_FACTOR: Final = 3.0
# The Unicode braille bit of the dot at (column, row) of a cell: columns 0-1, rows 0-3 from the top.
_BRAILLE_BITS: Final = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))
_PLAIN_BITS: Final = ((1,),)
_MARK_GLYPH: Final = {False: "│", True: "|"}  # by ``plain``
# The character of each set of dots; no dots is a space, not the blank braille pattern.
_BRAILLE: Final = [" ", *(chr(0x2800 + bits) for bits in range(1, 256))]


@dataclass(frozen=True, slots=True)
class Series:
    """Points sorted by x (a scatter's may come in any order); ``marker`` draws it in plain mode and
    draws a scatter's points in every mode."""

    points: tuple[Point, ...]
    marker: str
    scatter: bool = False


@dataclass(frozen=True, slots=True)
class Plot:
    """What to draw in ``width`` x ``height`` cells: x from ``x0`` to ``x1``, y from 0 to ``y_max``.

    ``marks`` holds groups of x positions (each group one owner, after the series). ``y_unit``
    "GiB" labels the y axis as sizes; ``x_unit`` "" labels x as the time elapsed since ``x0``.
    """

    series: tuple[Series, ...]
    x0: float
    x1: float
    y_max: float
    width: int
    height: int
    plain: bool = False
    marks: tuple[tuple[float, ...], ...] = ()
    y_unit: str = ""
    x_unit: str = ""


def tick_label(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def y_label(value: float, unit: str) -> str:
    """A y-axis label: a size for GiB (``"40 GiB"``, ``"512 MiB"``), a percentage, else a number."""
    if value == 0:
        return "0"
    if unit == "GiB":
        return format_size(value * GiB)
    return f"{tick_label(value)}%" if unit == "%" else tick_label(value)


def x_labels(plot: Plot) -> tuple[str, str, str]:
    """The x axis's start, middle and end: the time elapsed since x0, or numbers (the unit at the end)."""
    x0, x1 = plot.x0, _x_end(plot)
    ticks = (x0, (x0 + x1) / 2, x1)
    if plot.x_unit:
        first, middle, last = (tick_label(x) for x in ticks)
        return first, middle, f"{last} {plot.x_unit}"
    first, middle, last = (format_duration(x - x0) for x in ticks)
    return first, middle, last


def _x_end(plot: Plot) -> float:
    return plot.x1 if plot.x1 > plot.x0 else plot.x0 + 1.0


def rasterise(plot: Plot) -> tuple[Row, ...]:
    """The plot as ``plot.height`` rows of runs, each row ``plot.width`` cells; () when it cannot fit."""
    y_max = plot.y_max if plot.y_max > 0 else 1.0
    ticks = (y_max, y_max / 2, 0.0)
    labels = [y_label(v, plot.y_unit) for v in ticks]
    label_width = max(len(text) for text in labels) + 1
    columns, rows = plot.width - label_width, plot.height - 1
    if columns < 2 or rows < 1:
        return ()
    grid = _Grid(plot, columns, rows, y_max)
    for owner, series in enumerate(plot.series):
        if series.scatter:
            grid.scatter(series, owner)
        else:
            grid.line(series, owner)
    marked: dict[int, int] = {}  # cell column -> the owner of the mark drawn there
    for group, xs in enumerate(plot.marks, start=len(plot.series)):
        for x in xs:
            if grid.x0 <= x <= grid.x1:
                marked[grid.column_of(x) // grid.sub_x] = group
    label_rows = {grid.row_of(v) // grid.sub_y: text for v, text in zip(ticks, labels, strict=True)}
    out = [grid.row(r, label_rows.get(r, "").rjust(label_width - 1) + " ", marked) for r in range(rows)]
    out.append(((_x_axis(x_labels(plot), label_width, columns), AXIS),))
    return tuple(out)


class _Grid:
    """The dots of one plot: a bit set and an owner per cell, drawn series by series."""

    def __init__(self, plot: Plot, columns: int, rows: int, y_max: float) -> None:
        self.plot, self.columns = plot, columns
        table = _PLAIN_BITS if plot.plain else _BRAILLE_BITS
        self.sub_x, self.sub_y = len(table), len(table[0])
        dots_x, self.dots_y = columns * self.sub_x, rows * self.sub_y
        self.x0, self.x1, self.y_max = plot.x0, _x_end(plot), y_max
        self.scale_x = (dots_x - 1) / (self.x1 - self.x0)
        self.scale_y = (self.dots_y - 1) / y_max
        # Per dot column and dot row: the cell's column or first index, and the dot's place in the cell.
        self.cell_of_column = [c // self.sub_x for c in range(dots_x)]
        self.bits_of_column = [table[c % self.sub_x] for c in range(dots_x)]
        self.cell_of_row = [(r // self.sub_y) * columns for r in range(self.dots_y)]
        self.place_in_cell = [r % self.sub_y for r in range(self.dots_y)]
        self.bits = [0] * (columns * rows)
        self.owners = [AXIS] * (columns * rows)
        self.glyphs: dict[int, str] = {}  # scatter markers by cell

    def column_of(self, x: float) -> int:
        return int((x - self.x0) * self.scale_x + 0.5)

    def row_of(self, value: float) -> int:
        return min(self.dots_y - 1, max(0, int((self.y_max - value) * self.scale_y + 0.5)))

    def scatter(self, series: Series, owner: int) -> None:
        for x, value in series.points:
            if self.x0 <= x <= self.x1:
                cell = self.cell_of_row[self.row_of(value)] + self.cell_of_column[self.column_of(x)]
                self.glyphs[cell] = series.marker
                self.owners[cell] = owner

    def line(self, series: Series, owner: int) -> None:
        """Each dot column's run of the series, joined to the next column's (the chart's cost: kept lean)."""
        x0, x1, scale_x = self.x0, self.x1, self.scale_x
        y_max, scale_y, lowest = self.y_max, self.scale_y, self.dots_y - 1
        # Per dot column with samples: its highest and lowest row, its first and last sample's row and x.
        columns: list[tuple[int, int, int, int, int, float, float]] = []
        column = top = bottom = entry = exit_row = -1
        first_x = last_x = 0.0
        count = 0
        for x, value in series.points:
            if x < x0 or x > x1:
                continue
            count += 1
            c = int((x - x0) * scale_x + 0.5)
            r = int((y_max - value) * scale_y + 0.5)
            r = 0 if r < 0 else lowest if r > lowest else r
            if c != column:
                if column >= 0:
                    columns.append((column, top, bottom, entry, exit_row, first_x, last_x))
                column, top, bottom, entry, first_x = c, r, r, r, x
            elif r < top:
                top = r
            elif r > bottom:
                bottom = r
            exit_row, last_x = r, x
        if column < 0:
            return
        columns.append((column, top, bottom, entry, exit_row, first_x, last_x))
        # A gap: samples further apart than usual that leave a dot column empty between them.
        gap = GAP_FACTOR * (last_x - columns[0][5]) / (count - 1) if count > 1 else 0.0
        bits, owners, cell_of_row, place = self.bits, self.owners, self.cell_of_row, self.place_in_cell
        cell_of_column, bits_of_column = self.cell_of_column, self.bits_of_column
        previous, previous_row, previous_x = -1, 0, 0.0
        for column, top, bottom, entry, exit_row, first_x, last_x in columns:
            step = column - previous
            if previous >= 0 and (step == 1 or first_x - previous_x <= gap):
                # Joined: each column from the last one's exit to this one's entry holds the rows the
                # straight line between them crosses there, so a steep line stays unbroken.
                slope = (entry - previous_row) / step
                row_before = previous_row
                for i in range(1, step + 1):
                    row = int(previous_row + slope * i + 0.5)
                    low, high = (row_before, row) if row_before <= row else (row, row_before)
                    if i == step:  # this column: its own samples' rows and the line's way in
                        top = low if low < top else top
                        bottom = high if high > bottom else bottom
                    else:
                        c = previous + i
                        cell_column, column_bits = cell_of_column[c], bits_of_column[c]
                        for r in range(low, high + 1):
                            cell = cell_of_row[r] + cell_column
                            bits[cell] |= column_bits[place[r]]
                            owners[cell] = owner
                    row_before = row
            cell_column, column_bits = cell_of_column[column], bits_of_column[column]
            for r in range(top, bottom + 1):
                cell = cell_of_row[r] + cell_column
                bits[cell] |= column_bits[place[r]]
                owners[cell] = owner
            previous, previous_row, previous_x = column, exit_row, last_x

    def row(self, r: int, label: str, marked: dict[int, int]) -> Row:
        """Cell row ``r`` as runs: the label, then each cell's dots, scatter marker or mark."""
        columns = self.columns
        start = r * columns
        bits = self.bits[start : start + columns]
        glyphs = [(cell - start, glyph) for cell, glyph in self.glyphs.items() if start <= cell < start + columns]
        if not marked and not glyphs and not any(bits):
            return ((label + " " * columns, AXIS),)  # most rows of a chart: nothing drawn
        owners = self.owners[start : start + columns]
        if self.plot.plain:
            markers = [s.marker for s in self.plot.series]
            chars = [markers[o] if b else " " for b, o in zip(bits, owners, strict=True)]
        else:
            chars = list(map(_BRAILLE.__getitem__, bits))
        for c, group in marked.items():
            if not bits[c]:
                chars[c], owners[c] = _MARK_GLYPH[self.plot.plain], group
        for c, glyph in glyphs:
            chars[c] = glyph
        text = "".join(chars)
        ends = [c for c in range(1, columns) if owners[c] != owners[c - 1]]
        runs: list[Run] = [(label, AXIS)]
        begin = 0
        for end in (*ends, columns):
            runs.append((text[begin:end], owners[begin]))
            begin = end
        return _merged(runs)


def _merged(runs: list[Run]) -> Row:
    """Neighbouring runs of one owner as one run (the label column joins empty plot cells)."""
    merged: list[Run] = []
    for text, owner in runs:
        if merged and merged[-1][1] == owner:
            merged[-1] = (merged[-1][0] + text, owner)
        elif text:
            merged.append((text, owner))
    return tuple(merged)


def _x_axis(labels: tuple[str, str, str], label_width: int, columns: int) -> str:
    """The start label under the first plot column, the end one ending at the last, the middle one
    centred between them when it fits with a space on both sides."""
    first, middle, last = labels
    line = [" "] * (label_width + columns)
    end_start = max(label_width, len(line) - len(last))
    middle_start = label_width + (columns - len(middle)) // 2
    line[label_width : label_width + len(first)] = first
    if label_width + len(first) < middle_start and middle_start + len(middle) < end_start:
        line[middle_start : middle_start + len(middle)] = middle
    if end_start >= label_width + len(first) + 1:
        line[end_start:] = last
    return "".join(line)[: label_width + columns]
