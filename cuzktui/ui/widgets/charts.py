"""Time-series charts drawn with plotext at the widget's exact size (Dolphie's approach).

A :class:`Chart` is handed a :class:`ChartSpec` (what to draw, in display units) and builds the
figure for its current size with at most one point per column (peaks kept); the lines are
cached until the spec, the size or the theme changes, and a new spec repaints only the lines
that differ (a line-API widget), so over SSH a new sample costs a column, not the chart. The
caller replaces the spec only when its model counter moved, and the app polls once a second,
so a chart is rebuilt at most once a second and never when idle. The time axis is elapsed
time from ``t0``; callers keep ``t1`` fixed for a while (:func:`stepped_length`) so the
picture does not shift with every sample.

``ascii`` draws with plain characters only (no braille, no box lines); ``NO_COLOR`` (the
app's ``no_color``) draws without colour and tells the lines apart by their markers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from plotext._figure import _figure_class as Figure
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from ...units import format_duration
from ..theme import Palette

Point = tuple[float, float]

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
    """One chart: lines over [t0, t1] (Unix seconds), y from 0 to ``y_max`` in ``unit``. With ``x_unit``
    the x axis is not time but plain numbers in that unit, from t0 to t1; its points are few (a search's
    trials) and drawn as given, none dropped."""

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


def _segments(line: Text, console: Console) -> list[Segment]:
    """A line's segments, every one with a Style (Textual's NO_COLOR filter requires one)."""
    null = Style.null()
    return [Segment(seg.text, seg.style or null) for seg in line.render(console) if seg.text]


def _strip(line: Text, console: Console, width: int, base: Style) -> Strip:
    """One line padded to ``width`` on ``base``, built as one Strip (a chart rebuilds ~60 lines a
    second, and each Strip made on the way (padded, then styled) costs its caches)."""
    segments = _segments(line, console)
    length = line.cell_len
    if length < width:
        segments.append(Segment(" " * (width - length)))
        length = width
    return Strip(Segment.apply_style(segments, base), length)


def _cells(strip: Strip) -> list[tuple[str, object]]:
    return [(ch, segment.style) for segment in strip for ch in segment.text]


def changed_span(old: Strip, new: Strip) -> tuple[int, int] | None:
    """The [start, end) columns where two lines differ (None when equal): all that is resent."""
    a, b = _cells(old), _cells(new)
    if a == b:
        return None
    start = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    end = max(len(a), len(b))
    while end > start and end <= min(len(a), len(b)) and a[end - 1] == b[end - 1]:
        end -= 1
    return start, end


def _drawn_points(line: Line, spec: ChartSpec, buckets: int) -> list[Point]:
    """A time series at most one point per bucket; a numeric axis's few points (a search's trials) as given."""
    if spec.x_unit:
        return [p for p in line.points if spec.t0 <= p[0] <= spec.t1]
    return downsample(line.points, spec.t0, max(spec.t1, spec.t0 + 1.0), buckets)


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
        self._cache: tuple[object, list[Strip]] | None = None
        self._plot_cache: tuple[object, Text] | None = None

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    @property
    def spec(self) -> ChartSpec | None:
        return self._spec

    def show(self, spec: ChartSpec) -> None:
        """Draw ``spec``; only the lines that differ from what is on screen are repainted."""
        if spec == self._spec:
            return
        before = self._cache[1] if self._cache is not None else None
        self._spec = spec
        after = self._strips()
        if before is None or len(before) != len(after):
            self.refresh()
            return
        for y, (old, new) in enumerate(zip(before, after, strict=True)):
            changed = changed_span(old, new)
            if changed is not None:
                self.refresh(Region(changed[0], y, changed[1] - changed[0], 1))

    def _palette(self) -> Palette:
        return Palette.for_app(self.app)

    def render_line(self, y: int) -> Strip:
        strips = self._strips()
        return strips[y] if y < len(strips) else Strip.blank(self.size.width, self.rich_style)

    def _strips(self) -> list[Strip]:
        palette = self._palette()
        key = (self._spec, self.size, palette, self.rich_style)
        if self._cache is None or self._cache[0] != key:
            console = self.app.console
            lines = self.rendered().split("\n", allow_blank=True)
            # plotext leaves the background unset: the chart paints its own (the theme's), else a
            # light theme in a dark terminal shows a dark chart, its dark-on-dark lines unreadable.
            base, width = self.rich_style, self.size.width
            self._cache = (key, [_strip(line, console, width, base) for line in lines])
        return self._cache[1]

    def rendered(self) -> Text:
        """The whole chart as text at the current size: the legend, then the plot."""
        spec = self._spec
        if spec is None:
            return Text()
        palette = self._palette()
        width, height = self.size.width, self.size.height
        legend = self._legend(spec, palette, width)
        text = Text("\n").join(legend)
        text.append("\n")
        plot_height = height - len(legend)
        if not any(line.points for line in spec.lines):
            text.append(spec.empty, style="dim")
        elif width >= 12 and plot_height >= 3:
            text.append_text(self._plot(spec, palette, width, plot_height))
        # else: no room for a plot (several GPUs on a small terminal); the legend holds the figures
        return text

    def _legend(self, spec: ChartSpec, palette: Palette, width: int) -> list[Text]:
        """The title and one item per line (and the event marker), flowed into lines of ``width``."""
        plain = self.ascii_only or palette.no_color
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

    def _plot(self, spec: ChartSpec, palette: Palette, width: int, height: int) -> Text:
        plain = self.ascii_only or palette.no_color
        t0, t1 = spec.t0, max(spec.t1, spec.t0 + 1.0)
        origin = 0.0 if spec.x_unit else t0  # time is drawn as elapsed from t0; other units as they are
        y_max = nice_ceiling(spec.y_max)
        label_width = len(_tick_label(y_max)) + 1
        columns = max(1, width - label_width)
        # Braille packs two samples per column; plain markers one.
        buckets = columns if plain else columns * 2
        drawn = [(line, _drawn_points(line, spec, buckets)) for line in spec.lines]
        # What plotext draws: the points per column, not every sample. A new sample that moves no
        # column (a long window, a steady value) reuses the figure: plotext's build is most of a
        # chart's cost.
        key = (
            tuple((line.color, line.marker, line.scatter, points) for line, points in drawn),
            spec.x_unit,
            tuple(spec.all_marks()),
            t0,
            t1,
            y_max,
            width,
            height,
            palette,
            plain,
        )
        if self._plot_cache is not None and self._plot_cache[0] == key:
            return self._plot_cache[1]
        figure = Figure()
        figure._limit_size(False, False)  # plotext clips to the terminal it finds, which is not ours
        figure.plot_size(width, height)
        figure.theme("clear")
        figure.frame(False)
        for line, points in drawn:
            if not points:
                continue
            xs = [t - origin for t, _ in points]
            ys = [v for _, v in points]
            marker = line.marker if plain or line.scatter else "braille"
            draw = figure.scatter if line.scatter else figure.plot
            draw(xs, ys, marker=marker, color=palette.plotext(line.color))
        for marks in spec.all_marks():
            for t in marks.times:
                if plain:
                    figure.plot([t - origin] * 2, [0, y_max], marker="|", color=palette.plotext(marks.color))
                else:
                    figure.vertical_line(t - origin, color=palette.plotext(marks.color))
        figure.xlim(t0 - origin, t1 - origin)
        figure.ylim(0, y_max)
        figure.yticks([0, y_max / 2, y_max], ["0", _tick_label(y_max / 2), _tick_label(y_max)])
        ticks = [t0 - origin, t0 - origin + (t1 - t0) / 2, t1 - origin]
        labels = [_tick_label(x) for x in ticks] if spec.x_unit else [format_duration(x) for x in ticks]
        if spec.x_unit:
            labels[-1] += f" {spec.x_unit}"
        figure.xticks(ticks, labels)
        plot = Text.from_ansi(figure.build(), no_wrap=True)
        self._plot_cache = (key, plot)
        return plot
