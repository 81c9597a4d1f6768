"""Waterfall screen: where does each partition spend its time, and is the GPU kept busy?

The waterfall view fills the screen; Enter on a row opens its details below (a partition's
timings and GPU_TIMING / CUZK_TIMING breakdown with its job's outcome, a job without partitions'
outcome, or a GPU worker's busy share and idle gaps); Escape closes them, and so does a new daemon
run (they were the last run's).

Live, the time axis follows now while a proof is in flight and stops at the last event while the
daemon idles; in a replay it follows the cursor ("panned" once you pan). For cuzk-engine the axis and
the details count the emulated box's time (the log's real seconds ÷ time_scale, "box time"), as the
Bench screen and the report do.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

from ...controller import Controller
from ...timeline import run_number
from ...waterfall_layout import Row
from ..theme import Palette
from ..widgets.header import KeysFooter, screen_header
from ..widgets.panels import Panel
from ..widgets.waterfall import WaterfallView, job_detail, lane_detail, legend, partition_detail


class Legend(Static):
    """Re-drawn on every render, so a theme switch recolours it with the bars; it follows the view's
    mode (partitions or lanes)."""

    def __init__(self, ascii_only: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ascii_only = ascii_only

    def render(self) -> Text:
        palette = Palette.for_app(self.app)
        lanes = self.screen.query_one(WaterfallView).lanes
        return legend(palette, self.ascii_only or palette.no_color, lanes)


class WaterfallScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close_detail", "Close details", show=False)]

    def __init__(self, controller: Controller) -> None:
        super().__init__()
        self.controller = controller
        self._open: Row | None = None
        self._runs = 0  # daemon runs the timeline had when the details were opened

    def compose(self) -> ComposeResult:
        ascii_only = getattr(self.app, "ascii_only", False)
        yield screen_header(self.app)
        yield Legend(ascii_only, id="waterfall-legend")
        view = WaterfallView(ascii_only=ascii_only, id="waterfall")
        view.replay = self.controller.clock is not None
        yield view
        yield Panel(id="waterfall-detail")
        yield KeysFooter()

    def refresh_from_model(self) -> None:
        """Called by the app after a poll that moved the model, while this screen is visible."""
        view = self.query_one(WaterfallView)
        runs = len(self.controller.model.timeline.segments)
        if self._open is not None and runs > self._runs:
            # A new daemon run (a benchmark's hand-over, a restart): the details and the selection were the
            # last run's, and kept on screen they read as the new one's.
            self._open = None
            view.selected = None
        view.show_model(self.controller.model)
        self._show_detail()

    @on(WaterfallView.Opened)
    def _opened(self, message: WaterfallView.Opened) -> None:
        self._open = message.row
        self._runs = len(self.controller.model.timeline.segments)
        self._show_detail()

    @on(WaterfallView.Toggled)
    def _toggled(self) -> None:
        self.query_one(Legend).refresh()

    def action_close_detail(self) -> None:
        self._open = None
        self._show_detail()

    def _show_detail(self) -> None:
        detail = self.query_one("#waterfall-detail", Panel)
        row = self._open
        view = self.query_one(WaterfallView)
        window = view.window()
        model = self.controller.model
        span = model.timeline.time_span()
        if row is None or window is None or span is None:
            detail.set_class(False, "-open")
            return
        if row.partition is not None:
            ending = model.run_ending(row.partition.job.segment)
            worker = row.partition.worker
            gpu = model.timeline.worker_gpu(worker) if worker is not None else None
            segment = row.partition.job.segment
            run = run_number(segment) if len(model.timeline.segments) > 1 else None
            detail.show(partition_detail(row.partition, span[0], ending, gpu, run, model.daemon.time_scale))
        elif row.worker is not None:
            detail.show(lane_detail(model, row.worker, window))
        elif row.job is not None:
            detail.show(job_detail(row.job, model.run_ending(row.job.segment), model.daemon.time_scale))
        detail.set_class(True, "-open")
