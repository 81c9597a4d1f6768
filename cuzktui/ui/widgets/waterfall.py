"""The waterfall: every partition's synthesis, GPU-queue wait and GPU prove on one time axis.

A line-API :class:`~textual.scroll_view.ScrollView` (Toolong's pattern): ``render_line(y)``
draws only the visible rows, and each row's :class:`Strip` is cached until the timeline, the
view (zoom, pan, width, theme, mode) or the selection changes. Line 0 is a sticky time axis.
The rows themselves are counted, not built, when the timeline moves
(:class:`~cuzktui.waterfall_layout.WaterfallRows`): a :class:`Row` exists only once a line shows it.

Two views of the same :class:`~cuzktui.timeline.Timeline`:

* partitions: per daemon run (a restart is a separator row), per job, one row per partition;
* lanes: one row per GPU worker, grouped by GPU, showing which partition it proves and where it idles.

The time axis follows "now" until the user pans; zoom is seconds per column, and until the
user zooms the whole session is fitted to the width. Live, the window moves in steps, never
every second: fitted, it spans the session's start over the next round length (1m, 2m, 5m …,
as the dashboard's charts); zoomed, it jumps a quarter of its width when now reaches its right
edge. So a poll repaints only the rows whose bars changed (over SSH, the cells that differ).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import groupby
from typing import ClassVar, Literal, NamedTuple

from rich.segment import Segment as RichSegment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...figures import job_outcome, session_origin, timeline_now, waterfall_edge
from ...model import SessionModel
from ...timeline import Job, LaneEntry, Partition
from ...units import format_duration
from ...waterfall_layout import Row, WaterfallRows, clamp_window, column_owners
from ..theme import Palette
from .charts import changed_span, stepped_length

Phase = Literal["synth", "queue", "gpu", "failed", "busy"]
Interval = tuple[float, float, Phase]

# Phase -> (theme variable, plain character for --ascii / NO_COLOR).
PHASES: dict[Phase, tuple[str, str]] = {
    "synth": ("phase-synth", "="),
    "queue": ("phase-queue", "-"),
    "gpu": ("phase-gpu", "#"),
    "failed": ("phase-failed", "X"),
    "busy": ("phase-gpu", "#"),
}
# (plain, drawn) glyphs of what is not a phase's colour: a job row's waits before its first synthesis (in the
# scheduler, then for the memory budget) and its run; a lane's edge between two holds and its idle columns.
WAIT_GLYPH = (":", "┄")
RUN_GLYPH = (".", "─")
EDGE_GLYPH = ("|", "▏")
IDLE_GLYPH = (".", "·")
ZOOM_STEP = 1.5
STRIPS_KEPT = 4  # screens of rendered lines kept while the view does not change
AXIS_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400)


class _View(NamedTuple):
    """What every line of a frame is drawn from, taken once a frame; ``key`` says when the cached
    lines are stale."""

    key: tuple[object, ...]
    window: tuple[float, float] | None
    palette: Palette
    style: Style
    width: int
    label_width: int
    now: float | None
    plain: bool  # --ascii or NO_COLOR: glyphs instead of colours
    time_scale: float | None  # an engine's: the axis speaks the emulated box's time (real ÷ time_scale)


class _Looks(dict[tuple[str, bool], Style]):
    """A bar cell's style by (variable, dark), each made once for a row: a job row's wait or run, else
    a phase's colour with dark text on it (plain: bold)."""

    def __init__(self, palette: Palette, plain: bool) -> None:
        super().__init__()
        self.palette, self.plain = palette, plain

    def __missing__(self, key: tuple[str, bool]) -> Style:
        variable, dark = key
        if variable == "wait":
            style = self.palette.fg("phase-queue")
        elif variable == "job":
            style = Style(dim=True)
        elif self.plain:
            style = Style(bold=dark)
        else:
            style = self.palette.bg(variable) + Style(color="black" if dark else None)
        self[key] = style
        return style


def _joined(pieces: Sequence[tuple[str, Style]]) -> list[RichSegment]:
    """The pieces as segments, neighbours of equal style joined (one Style object per look: the
    identity test spares most comparisons by value)."""
    segments: list[RichSegment] = []
    text, style = "", None
    for piece, piece_style in pieces:
        if style is not None and (piece_style is style or piece_style == style):
            text += piece
            continue
        if style is not None:
            segments.append(RichSegment(text, style))
        text, style = piece, piece_style
    if style is not None:
        segments.append(RichSegment(text, style))
    return segments


PHASE_NAMES: dict[Phase, str] = {
    "synth": "synthesis",
    "queue": "waiting for GPU",
    "gpu": "GPU prove",
    "failed": "failed",
}


def legend(palette: Palette, plain: bool, lanes: bool) -> Text:
    """The key to what the rows draw, drawn as they draw it (the same looks and glyphs): the partitions
    view's phases and a job row's waits and run, or the lanes view's proving, hold names, edges and idle."""
    looks = _Looks(palette, plain)
    text = Text()

    def entry(sample: str, style: Style, label: str) -> None:
        text.append(sample, style)
        text.append(f" {label}  ")

    if lanes:
        variable, char = PHASES["busy"]
        entry((char if plain else " ") * 2, looks[variable, False], "GPU prove")
        entry(hold_label(LaneEntry(0.0, None, 0, "porep-1000-17", 3)), looks[variable, True], "job …-17, partition 3")
        entry(EDGE_GLYPH[not plain], looks[variable, True], "the next proof")
        entry(IDLE_GLYPH[not plain], palette.fg("lane-idle"), "idle")
        return text
    for phase, label in PHASE_NAMES.items():
        variable, char = PHASES[phase]
        entry((char if plain else " ") * 2, looks[variable, False], label)
    entry(WAIT_GLYPH[not plain], looks["wait", False], "queued")
    entry(RUN_GLYPH[not plain], looks["job", False], "proof")
    return text


def phase_intervals(p: Partition, stop: float | None) -> list[Interval]:
    """The partition's phases as (start, end, phase); an open phase runs to ``stop``."""
    marks: list[tuple[float | None, Phase]] = [
        (p.synth_start, "synth"),
        (p.synth_end if p.synth_end is not None else p.gpu_queue, "queue"),
        (p.gpu_pickup, "gpu"),
    ]
    intervals: list[Interval] = []
    known = [(t, phase) for t, phase in marks if t is not None]
    for i, (start, phase) in enumerate(known):
        end = known[i + 1][0] if i + 1 < len(known) else p.gpu_end
        if end is None:
            end = stop
        if end is None or start is None:
            continue
        intervals.append((start, max(start, end), phase))
    # Failed, its daemon died mid-phase, or lost in the GPU queue (its wait ends when it was replaced).
    if (p.failed or p.incomplete or p.job.status == "lost") and intervals:
        start, end, _ = intervals[-1]
        intervals[-1] = (start, end, "failed")
    return intervals


def short_job(job_id: str) -> str:
    """The distinguishing tail of a job id (``porep-1000-17`` → ``17``), to fit inside a bar."""
    return job_id.rsplit("-", 1)[-1]


def hold_label(entry: LaneEntry) -> str:
    """What a worker's hold says inside its bar when it fits: job/partition."""
    return f"{short_job(entry.job_id)}/p{entry.partition}"


class WaterfallView(ScrollView, can_focus=True):
    """The waterfall rows (see the module docstring)."""

    DEFAULT_CSS = """
    WaterfallView {
        height: 1fr;
        overflow-x: hidden;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "select(-1)", "Prev", show=False),
        Binding("down", "select(1)", "Next", show=False),
        Binding("enter", "open", "Details"),
        Binding("plus,equals_sign", "zoom(1)", "Zoom in", key_display="+"),
        Binding("minus", "zoom(-1)", "Zoom out", key_display="-"),
        Binding("0", "fit", "Fit"),
        Binding("left", "pan(-1)", "Pan", key_display="←→"),
        Binding("right", "pan(1)", "Pan", show=False),
        Binding("home", "pan_home", "Start", show=False),
        Binding("end", "follow", "Follow"),
        Binding("l", "toggle_lanes", "Lanes"),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
    ]

    class Opened(Message):
        """Enter on a row: the screen shows its details."""

        def __init__(self, row: Row) -> None:
            super().__init__()
            self.row = row

    class Toggled(Message):
        """The view switched between partitions and lanes: the screen's legend follows."""

    def __init__(self, *, ascii_only: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii_only = ascii_only
        self.lanes = False
        self.replay = False  # following a replay's cursor, not now (the screen sets it)
        self.follow = True
        self.seconds_per_column: float | None = None  # None: fit the whole session
        self.view_end: float | None = None
        self.selected: int | None = None
        self._model: SessionModel | None = None
        self._rows: WaterfallRows | None = None  # until a model is shown
        self._rows_key: tuple[int, int, bool] | None = None
        self._strips: dict[tuple[int, bool], Strip] = {}  # by (row, selected); row -1 is the axis
        self._strips_key: object = None
        self._frame: _View | None = None  # while a frame is drawn
        self._bars: dict[tuple[object, ...], list[RichSegment]] = {}  # a row's bar by its intervals
        self._bars_view: object = None  # the view they were drawn in

    # -- data ----------------------------------------------------------------------------------

    def show_model(self, model: SessionModel) -> None:
        """Point at (a possibly new) model; rebuild rows only when the timeline moved."""
        self._model = model
        at_bottom = self.scroll_y >= self.max_scroll_y
        key = (id(model), model.timeline.version, self.lanes)
        if key != self._rows_key:
            self._rows_key = key
            self._rows = WaterfallRows(model, lanes=self.lanes, ascii_only=self.ascii_only)
            if self.selected is not None and self.selected >= len(self._rows):
                self.selected = None
            virtual = Size(self.size.width, len(self._rows) + 1)
            if max(virtual.height, self.virtual_size.height) <= self.size.height:
                # All rows fit before and after: no scrollbar to update, and setting the reactive
                # would repaint the whole view; the lines that changed are repainted below.
                self.set_reactive(WaterfallView.virtual_size, virtual)
            else:
                self.virtual_size = virtual
            if self.follow and at_bottom:
                # Live, the newest jobs stay in view. force: the scrollbar this growth needs is not
                # laid out yet, and without it Textual refuses to scroll.
                self.scroll_end(animate=False, immediate=True, force=True)
        self._repaint_changed()

    def _repaint_changed(self) -> None:
        """Refresh only the visible lines, and within them the columns, that differ from the last paint."""
        height, width = self.size.height, self.size.width
        before = [self._strips.get(self._line_key(y)) for y in range(height)]
        self._frame = self._view()
        try:
            for y, old in enumerate(before):
                new = self.render_line(y)
                changed = (0, width) if old is None else changed_span(old, new)
                if changed is not None:
                    self.refresh(Region(changed[0], y, changed[1] - changed[0], 1))
        finally:
            self._frame = None

    @property
    def rows(self) -> Sequence[Row]:
        return self._rows if self._rows is not None else ()

    # -- view geometry ---------------------------------------------------------------------------

    @property
    def label_width(self) -> int:
        return max(10, min(24, self.size.width // 4))

    def window(self) -> tuple[float, float] | None:
        """The time range shown, [start, end], following now unless the user panned; always within the
        session (waterfall_layout.clamp_window)."""
        windows = self._windows()
        return windows[1] if windows is not None else None

    def _windows(self) -> tuple[tuple[float, float], tuple[float, float]] | None:
        """(the live window, the window shown): they differ once the user panned."""
        model = self._model
        if model is None:
            return None
        span = model.timeline.time_span()
        if span is None:
            return None
        origin = span[0]
        now = waterfall_edge(model) or span[1]
        columns = max(1, self.size.width - self.label_width)
        if self.seconds_per_column is None:
            width = stepped_length(now - origin)
            live_end = origin + width
        else:
            width = self.seconds_per_column * columns
            step = width / 4
            live_end = origin + math.ceil((now - origin) / step) * step
        live = clamp_window(live_end - width, live_end, origin, live_end)
        if self.follow or self.view_end is None:
            return live, live
        return live, clamp_window(self.view_end - width, self.view_end, origin, live[1])

    # -- actions ---------------------------------------------------------------------------------

    def action_select(self, step: int) -> None:
        target = self._rows.step(self.selected, step) if self._rows is not None else None
        if target is None:
            return
        self.selected = target
        visible = max(1, self.size.height - 1)
        if target < self.scroll_y:
            self.scroll_to(y=target, animate=False, immediate=True)
        elif target >= self.scroll_y + visible:
            self.scroll_to(y=target - visible + 1, animate=False, immediate=True)
        self.refresh()

    def action_open(self) -> None:
        if self.selected is not None and self.selected < len(self.rows):
            self.post_message(self.Opened(self.rows[self.selected]))

    def action_zoom(self, step: int) -> None:
        window = self.window()
        if window is None:
            return
        columns = max(1, self.size.width - self.label_width)
        current = (window[1] - window[0]) / columns
        self.seconds_per_column = max(0.01, current / ZOOM_STEP if step > 0 else current * ZOOM_STEP)
        self.refresh()

    def action_fit(self) -> None:
        self.seconds_per_column = None
        self.follow = True
        self.refresh()

    def action_pan(self, step: int) -> None:
        windows = self._windows()
        if windows is None:
            return
        live, (start, end) = windows
        self.view_end = end + step * (end - start) / 4
        self.follow = False
        shown = self.window()
        assert shown is not None
        # Kept where the session stops it, so a pan back takes effect at once; at the live edge it follows.
        self.view_end = shown[1]
        self.follow = shown[1] >= live[1]
        self.refresh()

    def action_pan_home(self) -> None:
        window = self.window()
        if window is None or self._model is None:
            return
        span = self._model.timeline.time_span()
        if span is not None:
            self.view_end = span[0] + (window[1] - window[0])
            self.follow = False
            self.refresh()

    def action_follow(self) -> None:
        """Follow now: the axis to the live edge and the rows to the newest jobs (which later polls keep
        in view while the view stays at the bottom)."""
        self.follow = True
        self.scroll_end(animate=False, immediate=True, force=True)
        self.refresh()

    def action_toggle_lanes(self) -> None:
        self.lanes = not self.lanes
        self.post_message(self.Toggled())
        self.selected = None
        self.scroll_to(y=0, animate=False, immediate=True)
        if self._model is not None:
            self.show_model(self._model)

    def action_page(self, step: int) -> None:
        self.scroll_to(y=self.scroll_y + step * max(1, self.size.height - 2), animate=False)

    # -- drawing ---------------------------------------------------------------------------------

    def _palette(self) -> Palette:
        return Palette.for_app(self.app)

    def _line_key(self, y: int) -> tuple[int, bool]:
        """The strip cache's key of viewport line ``y``: (row, selected); the axis is row -1."""
        row = -1 if y == 0 else int(self.scroll_y) + y - 1
        return row, row == self.selected

    def _view(self) -> _View:
        window = self.window()
        now = timeline_now(self._model) if self._model is not None else None
        # The columns not under the vertical scrollbar (it covers the last two once the rows outgrow the view).
        palette, style, width = self._palette(), self.rich_style, self.scrollable_content_region.width
        scale = self._model.daemon.time_scale if self._model is not None else None
        key = (self._rows_key, window, now, width, palette, self.ascii_only, style, scale, self.replay, self.follow)
        plain = self.ascii_only or palette.no_color
        return _View(key, window, palette, style, width, self.label_width, now, plain, scale)

    def render_lines(self, crop: Region) -> list[Strip]:
        # The view is the same for every line of a frame: taken once, not per line (the widget's
        # style alone walks its ancestors' CSS).
        self._frame = self._view()
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def render_line(self, y: int) -> Strip:
        view = self._frame or self._view()
        if view.key != self._strips_key:
            self._strips_key = view.key
            self._strips.clear()
        line_key = self._line_key(y)
        strip = self._strips.get(line_key)
        if strip is None:
            if len(self._strips) > STRIPS_KEPT * max(1, self.size.height):
                self._strips.clear()  # scrolled through many rows: keep what is on screen, not all of them
            # Painted on the theme's background, not the terminal's: a light theme in a dark terminal.
            strip = self._line(line_key[0], view).extend_cell_length(view.width)
            strip = strip.apply_style(view.style)
            self._strips[line_key] = strip
        return strip

    def _line(self, row: int, view: _View) -> Strip:
        window = view.window
        if window is None or self._model is None:
            if row < 0:
                return Strip([RichSegment("no TIMELINE events yet", Style(dim=True))])
            return Strip.blank(view.width, view.style)
        if row < 0:
            return self._axis(window, view)
        if row >= len(self.rows):
            return Strip.blank(view.width, view.style)
        return self._row(self.rows[row], window, view, row == self.selected)

    def _label(self, text: str, style: Style, width: int) -> list[RichSegment]:
        label = text if len(text) < width else text[: width - 2] + ("~" if self.ascii_only else "…")
        return [RichSegment(label.ljust(width - 1) + " ", style)]

    def _axis(self, window: tuple[float, float], view: _View) -> Strip:
        start, end = window
        columns = view.width - view.label_width
        spc = (end - start) / max(1, columns)
        origin = session_origin(self._model.timeline, start) if self._model is not None else start
        # An engine's log runs time_scale times faster than the box it models: its axis counts the box's
        # seconds, as Bench and the report do, and says so at its end.
        scale = view.time_scale or 1.0
        tag = " box time" if view.time_scale is not None and columns > 4 * len(" box time") else ""
        room = columns - len(tag)
        step = next((s for s in AXIS_STEPS if s >= spc / scale * 12), AXIS_STEPS[-1]) * scale
        cells = [" "] * columns
        first = origin + step * int((start - origin) // step)
        t = first
        while t <= end:
            column = int((t - start) / spc)
            if 0 <= column < room:
                label = ("|" if view.plain else "╵") + format_duration((t - origin) / scale)
                for i, ch in enumerate(label[: room - column]):
                    cells[column + i] = ch
            t += step
        cells[room:] = tag
        mode = "lanes" if self.lanes else "partitions"
        # What the window follows: now (live) or a replay's cursor; neither once the user has panned.
        follow = ("replay" if self.replay else "live") if self.follow else "panned"
        head = self._label(f"{mode} ({follow})", Style(bold=True), view.label_width)
        return Strip([*head, RichSegment("".join(cells), Style(dim=True))], view.width)

    def _row(self, row: Row, window: tuple[float, float], view: _View, selected: bool) -> Strip:
        assert self._model is not None
        timeline, palette, width = self._model.timeline, view.palette, view.width
        label_style = Style(reverse=True) if selected else Style()
        if row.kind == "segment":
            # Only a failed run's separator is coloured as a failure (and drawn heavy): a hand-over or an
            # applied config is routine.
            style = palette.fg("restart", bold=True) if row.failure else Style(dim=True, bold=True)
            fill = ("=" if row.failure else "-") if self.ascii_only else ("━" if row.failure else "─")
            text = f" {row.label} "
            return Strip([RichSegment((fill * 2 + text).ljust(width, fill), style)], width)
        if row.kind == "job":
            assert row.job is not None
            job = row.job
            marks = {"running": ">", "completed": "ok", "failed": "X", "incomplete": "?", "lost": "L"}
            glyphs = {"running": "▶", "completed": "✓", "failed": "✗", "incomplete": "?", "lost": "⊘"}
            # A job its daemon run took with it says how (SessionModel.run_ending), not only "?".
            ending = self._model.run_ending(job.segment) if job.status == "incomplete" else None
            killed = ending is not None and ending.startswith("killed")
            mark = (marks if self.ascii_only else glyphs)["failed" if killed else job.status]
            lost = " (lost in the GPU queue)" if job.status == "lost" else ""
            head = self._label(f"{mark} {row.label}{lost}", Style(bold=True, reverse=selected), view.label_width)
            stop = timeline.open_end(job, view.now)
            start = job.first_start if job.first_start is not None else job.first_time
            spans = [(start, stop, "job")] if start is not None else []
            # Before its first synthesis a job waits in the scheduler, then for the memory budget.
            for a, b in ((job.enqueued_at, job.dequeued_at), (job.dispatched_at, job.first_start)):
                if a is not None:
                    spans.insert(0, (a, b if b is not None else stop, "wait"))
            bar = Strip(self._bar(spans, window, view, job_row=True))
            if ending is not None:
                bar = self._after(bar, stop, window, ending, palette.fg("phase-failed") if killed else Style(dim=True))
            return Strip([*head, *bar], width)
        label = self._label(row.label, label_style, view.label_width)
        if row.kind == "partition":
            assert row.partition is not None and row.job is not None
            intervals = phase_intervals(row.partition, timeline.open_end(row.partition, view.now))
            return Strip(label + self._bar(intervals, window, view), width)
        assert row.worker is not None
        # The timeline keeps each lane indexed: a window's holds cost the holds in it (Timeline.lane_holds).
        lanes = timeline.lane_holds(row.worker, *window, view.now)
        return Strip(label + self._lane(lanes, window, view), width)

    def _after(self, bar: Strip, t: float, window: tuple[float, float], text: str, style: Style) -> Strip:
        """``bar`` with ``text`` written just right of time ``t``, when it fits before the right edge."""
        start, end = window
        columns = bar.cell_length
        column = math.ceil((t - start) / ((end - start) / max(1, columns)))
        written = f" {text}"
        if column < 0 or column + len(written) > columns:
            return bar
        note = Strip([RichSegment(written, style)])
        return Strip.join([bar.crop(0, column), note, bar.crop(column + len(written), columns)])

    def _bar(
        self,
        intervals: Sequence[tuple[float, float, str]],
        window: tuple[float, float],
        view: _View,
        job_row: bool = False,
    ) -> list[RichSegment]:
        """A partition's phases, or a job's waits and run (``job_row``): per column, the interval covering
        most of it (column_owners; a partition keeps a cell for every phase)."""
        columns, spc = self._geometry(window, view)
        palette, plain = view.palette, view.plain
        # The same bar in the same view draws the same: a poll that moved the timeline redraws the
        # few rows whose intervals changed, not every row on screen.
        drawn_in = (window, columns, palette, plain)
        if drawn_in != self._bars_view or len(self._bars) > STRIPS_KEPT * max(1, self.size.height):
            self._bars_view = drawn_in
            self._bars.clear()
        bar = (tuple(intervals), job_row)
        known = self._bars.get(bar)
        if known is not None:
            return known
        owners = column_owners(intervals, window[0], spc, columns, keep_every=not job_row)
        looks = _Looks(palette, plain)
        pieces: list[tuple[str, Style]] = []
        # Nothing is written inside these bars: a run of columns of one interval is one piece.
        for hit, run in groupby(owners):
            width = len(list(run))
            if hit is None:
                pieces.append((" " * width, Style()))
            elif job_row:
                waiting = intervals[hit][2] == "wait"
                char = (WAIT_GLYPH if waiting else RUN_GLYPH)[not plain]
                pieces.append((char * width, looks["wait" if waiting else "job", False]))
            else:
                variable, plain_char = PHASES[intervals[hit][2]]  # type: ignore[index]
                pieces.append(((plain_char if plain else " ") * width, looks[variable, False]))
        self._bars[bar] = segments = _joined(pieces)
        return segments

    def _lane(
        self,
        holds: Sequence[tuple[float, float, LaneEntry]],
        window: tuple[float, float],
        view: _View,
    ) -> list[RichSegment]:
        """A worker's lane: per column, the hold covering most of it, named inside its bar where the
        name fits; the columns before ``now`` that no hold covers are idle (dotted), the future blank."""
        columns, spc = self._geometry(window, view)
        palette, plain, now = view.palette, view.plain, view.now
        start, end = window
        idle = (IDLE_GLYPH[not plain], palette.fg("lane-idle"))
        looks = _Looks(palette, plain)
        variable, plain_char = PHASES["busy"]
        pieces: list[tuple[str, Style]] = []
        previous: int | None = None
        label_left = ""
        for column, hit in enumerate(column_owners(holds, start, spc, columns)):
            a = start + column * spc
            if hit is None:
                pieces.append((idle[0] if now is None or a < now else " ", idle[1]))
                previous = None
                label_left = ""
                continue
            if hit != previous:
                # A new hold: an edge where it directly follows another, then its name (job/partition,
                # else the partition alone) only when the name fits in the bar: never a run-on.
                edge = EDGE_GLYPH[not plain] if previous is not None else ""
                room = round((min(holds[hit][1], end) - a) / spc) - len(edge)
                label = hold_label(holds[hit][2])
                label_left = edge + next((n for n in (label, label.rsplit("/", 1)[-1]) if len(n) <= room), "")
            previous = hit
            ch = label_left[0] if label_left else (plain_char if plain else " ")
            label_left = label_left[1:]
            dark = bool(label_left) or ch != plain_char if plain else not ch.isspace()
            pieces.append((ch, looks[variable, dark]))
        return _joined(pieces)

    @staticmethod
    def _geometry(window: tuple[float, float], view: _View) -> tuple[int, float]:
        """(bar columns, seconds per column) of a row's bar area."""
        columns = max(0, view.width - view.label_width)
        return columns, (window[1] - window[0]) / max(1, columns)

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows) + 1)


def _secs(value: float | None, scale: float = 1.0) -> str:
    """Seconds of the log, in the emulated box's time for an engine's ``scale`` (its time_scale)."""
    return f"{value / scale:.1f}s" if value is not None else "—"


def _outcome(job: Job) -> list[str | tuple[str, str]]:
    """Why a failed or lost job ended, in the daemon's words where it gave any (its failure text), as the
    details' second line; nothing for another job (an incomplete one's partitions say how its run ended)."""
    outcome = job_outcome(job)
    if outcome is None:
        return []
    what, why = outcome
    return [("outcome     ", "bold"), (f"{what}  ", "bold $error"), why, "\n"]


def _waits(job: Job, scale: float = 1.0) -> list[str | tuple[str, str]]:
    if job.scheduler_wait_s is None and job.budget_wait_s is None:
        return []
    return [
        ("waits       ", "$phase-queue"),
        f"scheduler {_secs(job.scheduler_wait_s, scale)}   memory budget {_secs(job.budget_wait_s, scale)}",
        "\n",
    ]


def job_detail(job: Job, ending: str = "incomplete (daemon run ended)", time_scale: float | None = None) -> Content:
    """A job that has no partition to open (it ended before any synthesis, e.g. every job of a daemon built
    without CUDA): its outcome and its waits (in the emulated box's time with an engine's ``time_scale``,
    as on the axis)."""
    waits = _waits(job, time_scale or 1.0)
    parts: list[str | tuple[str, str]] = [
        (job.job_id, "bold"),
        f"  {job.kind}" if job.kind else "",
        (f"  {ending}" if job.status == "incomplete" else "", "bold $error"),
        ("  · emulated box time" if time_scale is not None and waits else "", "dim"),
        "\n",
        *_outcome(job),
        *waits,
    ]
    if job.status == "running":
        parts.append("no phase logged yet")
    return Content.assemble(*parts)


def partition_detail(
    p: Partition,
    origin: float,
    ending: str = "incomplete (daemon run ended)",
    gpu: int | None = None,
    run: int | None = None,
    time_scale: float | None = None,
) -> Content:
    """Timings of one partition: its job's outcome (the daemon's failure text), phase boundaries, durations,
    GPU_TIMING / FIN / CUZK_TIMING; ``ending`` says how its daemon run took it when it is incomplete
    (SessionModel.run_ending), ``gpu`` the ordinal of its worker's GPU when known (Timeline.worker_gpu),
    ``run`` its daemon run's number where the session has several (a benchmark's request ids repeat in the
    next one's run). With an engine's ``time_scale`` the times are the emulated box's, as on the axis; the
    log's own ``*_ms`` figures are quoted as the log has them (the engine's real milliseconds)."""
    job = p.job
    scale = time_scale or 1.0

    def at(t: float | None) -> str:
        return format_duration((t - origin) / scale) if t is not None else "—"

    def secs(value: float | None) -> str:
        return _secs(value, scale)

    log = "log " if time_scale is not None else ""

    parts: list[str | tuple[str, str]] = [
        (f"{job.job_id}", "bold"),
        f" of daemon run {run}" if run is not None else "",
        f"  partition {p.index}",
        f"  worker {p.worker}" if p.worker is not None else "",
        f" on GPU{gpu}" if p.worker is not None and gpu is not None else "",
        ("  FAILED" if p.failed else f"  {ending}" if p.incomplete else "", "bold $error"),
        ("  · emulated box time" if time_scale is not None else "", "dim"),
        "\n",
        *_outcome(job),
        *_waits(job, scale),
    ]

    parts += [
        ("synthesis   ", "$phase-synth"),
        f"{at(p.synth_start)} → {at(p.synth_end)}  {secs(p.synth_s)}",
        f" ({log}synth_ms {p.synth_ms})" if p.synth_ms is not None else "",
        {True: "  pinned buffers", False: "  unpinned (pinned pool missed)", None: ""}[p.is_pinned],
        "\n",
        ("GPU queue   ", "$phase-queue"),
        f"{at(p.gpu_queue)} → {at(p.gpu_pickup)}  {secs(p.queue_wait_s)}",
        f"   pre-prove {secs(p.pre_prove_s)}" if p.pre_prove_s else "",
        "\n",
        ("GPU         ", "$phase-gpu"),
        f"{at(p.gpu_start)} → {at(p.gpu_end)}  {secs(p.gpu_s)}",
        f" ({log}gpu_ms {p.gpu_ms}, incl. GPU-mutex wait)" if p.gpu_ms is not None else "",
    ]
    timings = (
        ("GPU_TIMING", p.gpu_timing),
        ("FIN_TIMING", p.fin_timing),
        ("CUZK_TIMING", p.cuzk_timing),
        ("CUZK_NTT_H", p.ntt_timing),
    )
    for title, values in timings:
        if values:
            parts += ["\n", (f"{title:<12}", "bold"), " ".join(f"{k}={v}" for k, v in values.items())]
    return Content.assemble(*parts)


def lane_detail(model: SessionModel, worker: int, window: tuple[float, float]) -> Content:
    """A worker's busy fraction and idle gaps over the shown window up to now (is the GPU starved?), in
    the emulated box's time for an engine, as on the axis."""
    timeline = model.timeline
    scale = model.daemon.time_scale or 1.0
    start, end = window
    now = timeline_now(model)
    if now is not None and start < now < end:
        end = now  # a live window reaches past now: the future is neither busy nor idle
    busy, gaps = timeline.worker_use(worker, start, end, min_gap_s=max(1.0, (end - start) / 100))
    idle = sum(b - a for a, b in gaps)
    origin = session_origin(timeline, start)
    gpu = timeline.worker_gpu(worker)
    parts: list[str | tuple[str, str]] = [
        (f"GPU worker {worker}" + ("" if gpu is None else f" on GPU{gpu}"), "bold"),
        f"  busy {busy:.0%} of the shown {format_duration((end - start) / scale)}",
        f" · idle {format_duration(idle / scale)} in {len(gaps)} gap(s)\n",
    ]
    longest = sorted(gaps, key=lambda g: g[0] - g[1])[:3]
    if longest:
        parts.append("longest idle: ")
        parts.append(
            ", ".join(
                f"{format_duration((b - a) / scale)} from {format_duration((a - origin) / scale)}" for a, b in longest
            )
        )
        parts.append("\n")
    if busy < 0.8 and gaps:
        parts.append(("GPU waits for synthesis: raise max_parallel_synthesis if memory allows", "$accent"))
    return Content.assemble(*parts)
