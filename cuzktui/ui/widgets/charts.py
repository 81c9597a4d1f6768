"""Time-series charts drawn as braille line plots (cuzktui/braille_plot.py) at the widget's exact size.

A :class:`Chart` is handed a :class:`ChartSpec` (what to draw, in display units): a legend line
over the plot that :func:`cuzktui.braille_plot.rasterise` computes for the current size. The
widget uses the line API: each line is kept as runs of (text, style) with its Strip, rebuilt when
the spec, the size or the theme changes, and a new spec repaints only the columns that differ, so
over SSH a new sample costs a column, not the chart. The caller replaces the spec only when its
model counter moved, and the app polls once a second, so a chart is recomputed at most once a
second and never when idle. The time axis is elapsed time from ``t0``; callers keep ``t1`` fixed
for a while (:func:`stepped_length`) so the picture does not shift with every sample.

``ascii`` draws with plain characters only (one marker a cell, no braille, no box lines);
``NO_COLOR`` (the app's ``no_color``) draws without colour and tells the lines apart by their markers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from ...braille_plot import AXIS, Plot, Point, Series, rasterise
from ..theme import Palette

WINDOWS_S = (60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400)


def stepped_length(span: float) -> float:
    """The first round length (1m, 2m, 5m … 24h, then whole days) that holds ``span`` seconds.

    A time axis that grows in such steps stays put between steps: new data adds a column at the
    right instead of rescaling (and so repainting over SSH) everything already drawn.
    """
    return next((w for w in WINDOWS_S if w >= span), WINDOWS_S[-1] * (1 + int(span // WINDOWS_S[-1])))


@dataclass(frozen=True, slots=True)
class Line:
    label: str
    color: str  # a theme variable, e.g. "mem-rss"
    points: tuple[Point, ...]
    marker: str  # the plain character used in ascii / no-colour mode
    value: str = ""  # the latest value, shown in the legend
    scatter: bool = False  # points drawn apart, each with ``marker`` (not joined into a line)


@dataclass(frozen=True, slots=True)
class Marks:
    """Moments marked by vertical lines beside a chart's own events (evictions, budget stalls)."""

    times: tuple[float, ...]
    label: str
    color: str


@dataclass(frozen=True, slots=True)
class ChartSpec:
    """One chart: lines over [t0, t1] (Unix seconds), y from 0 to ``y_max`` in ``unit`` ("GiB" labels
    the axis as sizes, "%" as percentages). With ``x_unit`` the x axis is not time but plain numbers in
    that unit, from t0 to t1."""

    title: str
    lines: tuple[Line, ...]
    t0: float
    t1: float
    y_max: float
    unit: str
    events: tuple[float, ...] = ()  # moments marked by a vertical line (OOM kills)
    event_label: str = ""
    event_color: str = "mem-oom"
    empty: str = "no samples yet"
    marks: tuple[Marks, ...] = ()
    x_unit: str = ""

    def all_marks(self) -> list[Marks]:
        return [m for m in (Marks(self.events, self.event_label, self.event_color), *self.marks) if m.times]


def nice_ceiling(value: float) -> float:
    """The next round number (1, 1.2, 1.5, 2 … 8 × 10^n) at or above ``value``: short axis labels."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        candidate = step * 10.0**exponent
        if candidate >= value * 0.999:
            return candidate
    return 10.0 ** (exponent + 1)


LEGEND_SWATCH = "━"

# One line of the chart as drawn: runs of text, each with its whole style (the background included).
Runs = tuple[tuple[str, Style], ...]


def _cells(runs: Sequence[tuple[str, object]]) -> list[tuple[str, object]]:
    return [(ch, style) for text, style in runs for ch in text]


def _changed_columns(a: list[tuple[str, object]], b: list[tuple[str, object]]) -> tuple[int, int] | None:
    """The [start, end) columns where two lines of cells differ (None when equal)."""
    if a == b:
        return None
    start = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    end = max(len(a), len(b))
    while end > start and end <= min(len(a), len(b)) and a[end - 1] == b[end - 1]:
        end -= 1
    return start, end


def changed_span(old: Strip, new: Strip) -> tuple[int, int] | None:
    """The [start, end) columns where two lines differ (None when equal): all that is resent."""
    return _changed_columns(_cells([(s.text, s.style) for s in old]), _cells([(s.text, s.style) for s in new]))


def _text_runs(line: Text, console: Console, base: Style) -> list[tuple[str, Style]]:
    """A Text's runs on ``base``: every segment gets a Style (Textual's NO_COLOR filter requires one)."""
    return [(seg.text, base + seg.style if seg.style else base) for seg in line.render(console) if seg.text]


class Chart(Widget):
    """A legend line over a braille time-series plot, recomputed only when spec, size or theme change."""

    DEFAULT_CSS = """
    Chart {
        height: 1fr;
        min-height: 5;
    }
    """

    def __init__(self, *, ascii_only: bool = False, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.ascii_only = ascii_only
        self._spec: ChartSpec | None = None
        self._key: object = None  # what the lines below were drawn for
        self._lines: list[Runs] = []
        self._strips: list[Strip] = []
        self._legend_cache: tuple[object, list[list[tuple[str, Style]]]] = (None, [])
        self._look: tuple[Palette, Style] | None = None  # the theme's colours and the widget's style

    def _looks(self) -> tuple[Palette, Style]:
        """The palette and base style, read once per theme: both walk the theme and the DOM."""
        if self._look is None:
            self._look = (Palette.for_app(self.app), self.rich_style)
        return self._look

    def _theme_changed(self) -> None:
        self._look = None
        self.refresh()

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._theme_changed())

    @property
    def spec(self) -> ChartSpec | None:
        return self._spec

    def show(self, spec: ChartSpec) -> None:
        """Draw ``spec``; only the columns that differ from what is on screen are repainted."""
        if spec == self._spec:
            return
        before = self._lines
        drawn = self._key is not None
        self._spec = spec
        after = self._update()
        if not drawn or len(before) != len(after):
            self.refresh()
            return
        regions = []
        for y, (old, new) in enumerate(zip(before, after, strict=True)):
            if old != new:
                changed = _changed_columns(_cells(old), _cells(new))
                if changed is not None:
                    regions.append(Region(changed[0], y, changed[1] - changed[0], 1))
        if regions:
            self.refresh(*regions)  # one call: each one posts messages

    def render_lines(self, crop: Region) -> list[Strip]:
        self._update()  # once a paint, not once a line: the theme's palette and style take a while
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        return self._strips[y] if y < len(self._strips) else Strip.blank(self.size.width, self.rich_style)

    def _update(self) -> list[Runs]:
        """The chart's lines for the current spec, size and theme; Strips kept for lines that did not change."""
        palette, base = self._looks()
        key = (self._spec, self.size, palette, base)
        if key == self._key:
            return self._lines
        lines = self._draw(palette, base)
        width = self.size.width
        kept = dict(zip(self._lines, self._strips, strict=True))
        self._strips = [kept[line] if line in kept else Strip([Segment(*run) for run in line], width) for line in lines]
        self._key, self._lines = key, lines
        return lines

    def _draw(self, palette: Palette, base: Style) -> list[Runs]:
        """The legend, then the plot, each line padded to the width on the widget's background (the
        theme's: else a light theme in a dark terminal shows a dark chart, its lines unreadable)."""
        spec = self._spec
        if spec is None:
            return []
        width, height = self.size
        plain = self.ascii_only or palette.no_color
        console = self.app.console
        rows = list(self._legend_rows(spec, palette, width, plain, base))
        plot_height = height - len(rows)
        if not any(line.points for line in spec.lines):
            rows.append(_text_runs(Text(spec.empty, style="dim"), console, base))
        elif width >= 12 and plot_height >= 3:
            styles = [base + palette.fg(line.color) for line in spec.lines]
            styles += [base + palette.fg(marks.color) for marks in spec.all_marks()]
            for row in rasterise(self._plot(spec, width, plot_height, plain)):
                rows.append([(text, base if owner == AXIS else styles[owner]) for text, owner in row])
        # else: no room for a plot (several GPUs on a small terminal); the legend holds the figures
        return [_padded(row, width, base) for row in rows[:height]]

    @staticmethod
    def _plot(spec: ChartSpec, width: int, height: int, plain: bool) -> Plot:
        return Plot(
            series=tuple(Series(line.points, line.marker, line.scatter) for line in spec.lines),
            x0=spec.t0,
            x1=spec.t1,
            y_max=nice_ceiling(spec.y_max),
            width=width,
            height=height,
            plain=plain,
            marks=tuple(marks.times for marks in spec.all_marks()),
            y_unit=spec.unit,
            x_unit=spec.x_unit,
        )

    def _legend_rows(
        self, spec: ChartSpec, palette: Palette, width: int, plain: bool, base: Style
    ) -> list[list[tuple[str, Style]]]:
        """The legend's lines as runs, rebuilt only when a title, label or value in it changed."""
        key = (
            spec.title,
            tuple((line.label, line.value, line.color, line.marker) for line in spec.lines),
            tuple((marks.label, marks.color, len(marks.times)) for marks in spec.all_marks()),
            width,
            plain,
            palette,
            base,
        )
        if self._legend_cache[0] != key:
            console = self.app.console
            rows = [_text_runs(line, console, base) for line in self._legend(spec, palette, width, plain)]
            self._legend_cache = (key, rows)
        return self._legend_cache[1]

    @staticmethod
    def _legend(spec: ChartSpec, palette: Palette, width: int, plain: bool) -> list[Text]:
        """The title and one item per line (and the event marker), flowed into lines of ``width``."""
        items = [Text(spec.title, style="bold")]
        for line in spec.lines:
            item = Text(line.marker if plain else LEGEND_SWATCH, style=palette.fg(line.color, bold=True))
            item.append(f" {line.label} {line.value}".rstrip())
            items.append(item)
        for marks in spec.all_marks():
            item = Text("|" if plain else "│", style=palette.fg(marks.color, bold=True))
            item.append(f" {marks.label} {'x' if plain else '×'}{len(marks.times)}")
            items.append(item)
        lines = [items[0]]
        for item in items[1:]:
            if lines[-1].cell_len + 2 + item.cell_len <= width:
                lines[-1] = Text.assemble(lines[-1], "  ", item)
            else:
                lines.append(item)
        return lines


def _padded(row: list[tuple[str, Style]], width: int, base: Style) -> Runs:
    """A line cut or padded with the background to exactly ``width`` cells."""
    out: list[tuple[str, Style]] = []
    used = 0
    for text, style in row:
        if used + len(text) > width:
            text = text[: width - used]
        if text:
            out.append((text, style))
            used += len(text)
    if used < width:
        out.append((" " * (width - used), base))
    return tuple(out)
