"""Time-series charts drawn with plotext at the widget's exact size (Dolphie's approach).

A :class:`Chart` is handed a :class:`ChartSpec` (what to draw, in display units) and turns it
into text only when it is shown: the figure is built for the current size with at most one
point per column (peaks kept), and the built text is cached until the spec, the size or the
theme changes. The caller replaces the spec only when its model counter moved, and the app
polls once a second, so a chart is rebuilt at most once a second and never when idle.

``ascii`` draws with plain characters only (no braille, no box lines); ``NO_COLOR`` (the
app's ``no_color``) draws without colour and tells the lines apart by their markers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from plotext._figure import _figure_class as Figure
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget

from ..theme import Palette

Point = tuple[float, float]


@dataclass(frozen=True, slots=True)
class Line:
    label: str
    color: str  # a theme variable, e.g. "mem-rss"
    points: tuple[Point, ...]
    marker: str  # the plain character used in ascii / no-colour mode
    value: str = ""  # the latest value, shown in the legend


@dataclass(frozen=True, slots=True)
class ChartSpec:
    """One chart: lines over [t0, t1] (Unix seconds), y from 0 to ``y_max`` in ``unit``."""

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


def downsample(points: Sequence[Point], t0: float, t1: float, buckets: int) -> list[Point]:
    """At most one point per bucket of [t0, t1], keeping each bucket's largest value.

    The maximum, not the mean: the sample before an OOM kill is the one that matters.
    """
    if buckets < 1 or t1 <= t0:
        return list(points[-1:])
    width = (t1 - t0) / buckets
    best: dict[int, Point] = {}
    for t, v in points:
        if t < t0 or t > t1:
            continue
        b = min(int((t - t0) / width), buckets - 1)
        kept = best.get(b)
        if kept is None or v > kept[1]:
            best[b] = (t, v)
    return [best[b] for b in sorted(best)]


def format_duration(seconds: float) -> str:
    """``90`` → ``1m30s``: a compact, unsigned duration (whole seconds)."""
    total = round(abs(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    return f"{secs}s"


def format_ago(seconds: float) -> str:
    """``-90`` → ``-1m30s``, ``0`` → ``now``: time-axis labels relative to the chart's end."""
    if abs(seconds) < 0.5:
        return "now"
    return ("-" if seconds < 0 else "+") + format_duration(seconds)


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


def _tick_label(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


LEGEND_SWATCH = "━"


class Chart(Widget):
    """A legend line over a plotext time-series plot, rebuilt only when spec, size or theme change."""

    DEFAULT_CSS = """
    Chart {
        height: 1fr;
        min-height: 5;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, *, ascii_only: bool = False, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.ascii_only = ascii_only
        self._spec: ChartSpec | None = None
        self._cache: tuple[object, Text] | None = None
        self.builds = 0  # how many times a figure was built (the SSH cost tests read it)

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    @property
    def spec(self) -> ChartSpec | None:
        return self._spec

    def show(self, spec: ChartSpec) -> None:
        if spec != self._spec:
            self._spec = spec
            self.refresh()

    def _palette(self) -> Palette:
        return Palette.from_variables(self.app.theme_variables, self.app.no_color)

    def render(self) -> RenderResult:
        spec = self._spec
        if spec is None:
            return ""
        palette = self._palette()
        width, height = self.size.width, self.size.height
        key = (spec, width, height, palette)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        legend = self._legend(spec, palette, width)
        text = Text("\n").join(legend)
        text.append("\n")
        plot_height = height - len(legend)
        if width >= 12 and plot_height >= 3 and any(line.points for line in spec.lines):
            text.append_text(self._plot(spec, palette, width, plot_height))
        else:
            text.append(spec.empty, style="dim")
        self._cache = (key, text)
        return text

    def _legend(self, spec: ChartSpec, palette: Palette, width: int) -> list[Text]:
        """The title and one item per line (and the event marker), flowed into lines of ``width``."""
        plain = self.ascii_only or palette.no_color
        items = [Text(spec.title, style="bold")]
        for line in spec.lines:
            item = Text(line.marker if plain else LEGEND_SWATCH, style=palette.fg(line.color, bold=True))
            item.append(f" {line.label} {line.value}".rstrip())
            items.append(item)
        if spec.events:
            item = Text("|" if plain else "│", style=palette.fg(spec.event_color, bold=True))
            item.append(f" {spec.event_label} {'x' if plain else '×'}{len(spec.events)}")
            items.append(item)
        lines = [items[0]]
        for item in items[1:]:
            if lines[-1].cell_len + 2 + item.cell_len <= width:
                lines[-1] = Text.assemble(lines[-1], "  ", item)
            else:
                lines.append(item)
        return lines

    def _plot(self, spec: ChartSpec, palette: Palette, width: int, height: int) -> Text:
        self.builds += 1
        plain = self.ascii_only or palette.no_color
        figure = Figure()
        figure.plot_size(width, height)
        figure.theme("clear")
        figure.frame(False)
        t0, t1 = spec.t0, max(spec.t1, spec.t0 + 1.0)
        y_max = nice_ceiling(spec.y_max)
        label_width = len(_tick_label(y_max)) + 1
        columns = max(1, width - label_width)
        # Braille packs two samples per column; plain markers one.
        buckets = columns if plain else columns * 2
        for line in spec.lines:
            points = downsample(line.points, t0, t1, buckets)
            if not points:
                continue
            xs = [t - t1 for t, _ in points]
            ys = [v for _, v in points]
            marker = line.marker if plain else "braille"
            figure.plot(xs, ys, marker=marker, color=palette.plotext(line.color))
        for t in spec.events:
            if plain:
                figure.plot([t - t1, t - t1], [0, y_max], marker="|", color=palette.plotext(spec.event_color))
            else:
                figure.vertical_line(t - t1, color=palette.plotext(spec.event_color))
        figure.xlim(t0 - t1, 0)
        figure.ylim(0, y_max)
        figure.yticks([0, y_max / 2, y_max], ["0", _tick_label(y_max / 2), _tick_label(y_max)])
        ticks = [t0 - t1, (t0 - t1) / 2, 0.0]
        figure.xticks(ticks, [format_ago(x) for x in ticks])
        return Text.from_ansi(figure.build(), no_wrap=True)
