"""Dashboard: is the daemon alive, how close is it to the memory limit, is the GPU fed?

Top: the daemon's identity and state (a dead daemon's diagnosis highlighted) beside the
pipeline now and throughput. Middle: memory over the whole session (RSS, cgroup usage, the
cgroup limit and the daemon's budget, OOM kills marked) beside one chart per GPU. Bottom: the
last notices and what the numbers suggest turning next.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Static

from ...controller import Controller
from ...model import GpuState, SessionModel
from ...units import GiB, format_size
from ..widgets.charts import Chart, ChartSpec, Line, Marks, stepped_length
from ..widgets.header import KeysFooter, screen_header
from ..widgets.notices import NoticesList
from ..widgets.panels import (
    Panel,
    daemon_content,
    hints_content,
    pipeline_content,
    start_error_content,
)


def chart_window(model: SessionModel) -> tuple[float, float]:
    """The charts' time range: from the session's start over the next round length that holds it."""
    t0 = model.first_t or 0.0
    return t0, t0 + stepped_length((model.last_t or t0) - t0)


def memory_spec(model: SessionModel) -> ChartSpec:
    """RSS, cgroup usage, the cgroup limit and the budget in GiB over the whole session."""
    t0, t1 = chart_window(model)
    series = (
        ("RSS", "mem-rss", model.rss, "*"),
        ("cgroup", "mem-cgroup", model.cgroup_usage, "+"),
        ("limit", "mem-limit", model.cgroup_limit, "="),
        ("budget", "mem-budget", model.budget_total, "-"),
    )
    lines = []
    y_max = 1.0
    for label, color, data, marker in series:
        points = tuple((t, v / GiB) for t, v in data.points())
        if not points:
            continue
        y_max = max(y_max, max(v for _, v in points))
        last = data.last()
        lines.append(Line(label, color, points, marker, format_size(last[1]) if last else ""))
    return ChartSpec(
        title="Memory",
        lines=tuple(lines),
        t0=t0,
        t1=t1,
        y_max=y_max * 1.05,
        unit="GiB",
        events=tuple(model.oom_kills),
        event_label="OOM kill",
        marks=(
            Marks(tuple(t for t, _ in model.evictions if t is not None), "eviction", "phase-queue"),
            Marks(tuple(s.ts for s in model.budget_stalls if s.ts is not None), "budget stall", "phase-failed"),
        ),
    )


def gpu_spec(model: SessionModel, gpu: GpuState) -> ChartSpec:
    """One GPU's memory use (% of its total) and utilisation over the whole session."""
    t0, t1 = chart_window(model)
    lines = []
    if gpu.total_bytes:
        total = gpu.total_bytes
        used = tuple((t, 100.0 * v / total) for t, v in gpu.used.points())
        last = gpu.used.last()
        value = f"{format_size(last[1])}/{format_size(total)}" if last else ""
        lines.append(Line("mem", "gpu-mem", used, "#", value))
        own = gpu.daemon_used.last()
        if own is not None:  # NVML could attribute memory to the daemon's processes
            share = tuple((t, 100.0 * v / total) for t, v in gpu.daemon_used.points())
            lines.append(Line("daemon", "gpu-daemon", share, "d", format_size(own[1])))
    util = gpu.utilization.last()
    lines.append(Line("util", "gpu-util", tuple(gpu.utilization.points()), "o", f"{util[1]:.0f}%" if util else "n/a"))
    return ChartSpec(
        title=f"GPU{gpu.index} {gpu.name}",
        lines=tuple(lines),
        t0=t0,
        t1=t1,
        y_max=100.0,
        unit="%",
        empty="no samples from this GPU",
    )


class DashboardScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("n", "notices", "Notices")]
    AUTO_FOCUS = ""  # the notices list is entered with n: focused, it grows over the charts
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]  # noqa: RUF012 (Textual declares it so)

    def __init__(self, controller: Controller) -> None:
        super().__init__()
        self.controller = controller
        self._memory_seen: tuple[int, int] | None = None

    def compose(self) -> ComposeResult:
        ascii_only = getattr(self.app, "ascii_only", False)
        yield screen_header(self.app)
        yield Panel(id="start-error")
        with Horizontal(id="dash-top"):
            yield Panel(id="daemon")
            yield Panel(id="pipeline")
        with Horizontal(id="dash-charts"):
            yield Chart(ascii_only=ascii_only, id="memory")
            with Vertical(id="gpus"):
                yield Static("no NVIDIA GPU: no GPU samples", id="no-gpu")
        with Horizontal(id="dash-bottom"):
            yield NoticesList(id="notices")
            yield Panel(id="hints")
        yield KeysFooter()

    def refresh_from_model(self) -> None:
        """Called by the app after a poll that moved the model, while this screen is visible."""
        model = self.controller.model
        start_error = start_error_content(model)
        error_panel = self.query_one("#start-error", Panel)
        error_panel.display = start_error is not None
        if start_error is not None:
            error_panel.show(start_error)
        self.query_one("#daemon", Panel).show(daemon_content(model, self.controller.identity))
        self.query_one("#pipeline", Panel).show(pipeline_content(model))
        self.query_one("#notices", NoticesList).show(model)
        self.query_one("#hints", Panel).show(hints_content(model, self.controller.config_values()))
        seen = (id(model), model.memory_version)
        if seen != self._memory_seen:
            self._memory_seen = seen
            self._update_charts(model)

    def action_notices(self) -> None:
        """Into the notices list (it grows while it has the focus); enter opens one whole, Escape leaves."""
        self.query_one("#notices", NoticesList).focus()

    def _update_charts(self, model: SessionModel) -> None:
        self.query_one("#memory", Chart).show(memory_spec(model))
        box = self.query_one("#gpus", Vertical)
        self.query_one("#no-gpu").display = not model.gpus
        for index in sorted(model.gpus):
            charts = box.query(f"#gpu-{index}").results(Chart)
            chart = next(charts, None)
            if chart is None:
                chart = Chart(ascii_only=getattr(self.app, "ascii_only", False), id=f"gpu-{index}")
                box.mount(chart)
            chart.show(gpu_spec(model, model.gpus[index]))
