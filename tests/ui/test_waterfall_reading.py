"""The waterfall as a newcomer reads it (issue 27): a finished benchmark stays readable while the daemon
idles, an engine's times are the emulated box's as on Bench, the details follow the run, a replay says it
is one, and 16 colours keep the GPU queue apart from a failure."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.color import ColorType
from textual.geometry import Region

from cuzktui import events as ev
from cuzktui.figures import waterfall_edge
from cuzktui.model import SessionModel
from cuzktui.ui.app import CuzkApp
from cuzktui.ui.widgets.charts import stepped_length
from cuzktui.ui.widgets.panels import Panel
from cuzktui.ui.widgets.waterfall import WaterfallView
from tests.ui.conftest import settle
from tests.ui.fakes import END_AT, RESTART_AT, T0, FakeController, FakeReplay, Timed, build_model, scenario

# The scenario's benchmark is over by END_AT; its daemon then idles, sampled, for half an hour more.
IDLE_UNTIL = END_AT + 1800.0
# An engine running twice as fast as the box it models: its log's seconds are half the box's.
TIME_SCALE = 0.5


def engine_events(events: list[Timed]) -> list[Timed]:
    """The scenario as cuzk-engine at TIME_SCALE recorded it (its launches carry the time scale)."""
    return [(t, replace(e, time_scale=TIME_SCALE) if isinstance(e, ev.DaemonLaunched) else e) for t, e in events]


def make_app(fake: FakeController) -> CuzkApp:
    return CuzkApp(fake, poll_interval=1000)


def axis_text(view: WaterfallView) -> str:
    return "".join(segment.text for segment in view.render_line(0))


def detail_text(app: CuzkApp) -> str:
    panel = app.screen.query_one("#waterfall-detail", Panel)
    assert panel.has_class("-open") and panel._shown is not None
    return panel._shown.plain


def test_an_idle_daemon_does_not_move_the_waterfalls_edge() -> None:
    model = build_model(scenario(end_at=IDLE_UNTIL))
    span = model.timeline.time_span()
    assert span is not None and model.last_t == T0 + IDLE_UNTIL
    assert model.timeline.in_flight == 0
    assert waterfall_edge(model) == span[1], "the last thing that happened, not half an hour of idling"
    running = build_model(scenario(), until=100.0)
    assert running.timeline.in_flight and waterfall_edge(running) == running.last_t, "live while proofs run"


async def test_a_finished_benchmark_keeps_its_width_while_the_daemon_idles() -> None:
    app = make_app(FakeController(build_model(scenario(end_at=IDLE_UNTIL))))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await pilot.pause()
        view = app.screen.query_one(WaterfallView)
        window = view.window()
        span = app.controller.model.timeline.time_span()
        assert window is not None and span is not None
        # Fitted to the benchmark (5 min), not to the 35 min since the session began: a 40 s synthesis
        # is a tenth of the bar area wide, not 1-3 columns.
        assert window == (span[0], span[0] + stepped_length(span[1] - span[0]))
        assert window[1] - window[0] <= 600


async def test_an_engines_axis_and_details_are_in_the_boxs_time(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(engine_events(events))))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2", "down", "enter")
        await pilot.pause()
        view = app.screen.query_one(WaterfallView)
        axis = axis_text(view)
        # The log's 5 minutes are the box's 10, counted and labelled as Bench and the report do.
        assert axis.rstrip().endswith("box time") and "╵2m" in axis and "╵8m" in axis
        text = detail_text(app)
        assert text.splitlines()[0].endswith("  · emulated box time")
        # 40 s of synthesis in the log are 80 s of the box; the log's own figure is quoted as it is.
        assert "80.0s (log synth_ms 40000)" in text and "18.0s (log gpu_ms 9000" in text
        await pilot.press("escape", "l", "down", "enter")
        await pilot.pause()
        assert "of the shown 9m58s" in detail_text(app), "the log's 4m59s up to now, in the box's time"


async def test_a_new_daemon_run_closes_the_last_runs_details(events: list[Timed]) -> None:
    first_run = [(t, e) for t, e in events if t <= T0 + 100]
    fake = FakeController(build_model(first_run))
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2", "down", "enter")
        await pilot.pause()
        assert detail_text(app).startswith("porep-1000-1  partition 0")
        view = app.screen.query_one(WaterfallView)
        assert view.selected is not None
        for t, event in events:
            if T0 + 100 < t <= T0 + RESTART_AT + 30:  # the OOM kill, the restart, the new run's first proofs
                fake.model.apply(event)
        app.refresh_visible()
        await pilot.pause()
        panel = app.screen.query_one("#waterfall-detail", Panel)
        assert not panel.has_class("-open") and view.selected is None


async def test_the_axis_says_what_the_window_follows(events: list[Timed]) -> None:
    for fake, following in ((FakeController(build_model(events)), "live"), (FakeReplay(build_model(events)), "replay")):
        app = make_app(fake)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await pilot.press("2")
            await pilot.pause()
            view = app.screen.query_one(WaterfallView)
            assert axis_text(view).startswith(f"partitions ({following})")
            # A real daemon's (the scenario's) axis is wall time and says nothing more.
            assert "box time" not in axis_text(view) and "╵4m" in axis_text(view)
            await pilot.press("home")
            await pilot.pause()
            assert axis_text(view).startswith("partitions (panned)")


async def test_on_16_colours_the_gpu_queue_is_the_terminals_yellow_not_its_red(
    events: list[Timed], monkeypatch: pytest.MonkeyPatch
) -> None:
    # tmux's TERM=screen. Textual turned ANSI yellow into an RGB orange and the terminal's 16 folded it into
    # bright red, the failure's colour; the details' "$phase-queue" was the theme's amber, folded the same way.
    monkeypatch.setenv("TERM", "screen")
    monkeypatch.delenv("COLORTERM")
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2", "down", "enter")
        await pilot.pause()
        assert app.native_ansi_color, "the terminal's own 16 colours, not Textual's RGB stand-ins"
        legend = app.screen.query_one("#waterfall-legend")
        swatches = [
            seg.style.bgcolor
            for strip in legend.render_lines(Region(0, 0, legend.size.width, 1))
            for seg in strip
            if seg.style is not None and seg.style.bgcolor is not None and seg.style.bgcolor.type != ColorType.DEFAULT
        ]
        assert [(c.type, c.number) for c in swatches] == [(ColorType.STANDARD, n) for n in (4, 3, 2, 1)]
        panel = app.screen.query_one("#waterfall-detail", Panel)
        lines = panel.render_lines(Region(0, 0, panel.size.width, panel.size.height))
        queue = next(seg for strip in lines for seg in strip if seg.text.startswith("GPU queue"))
        assert queue.style is not None and queue.style.color is not None
        assert (queue.style.color.type, queue.style.color.number) == (ColorType.STANDARD, 3)


def test_the_scenario_ends_its_proofs_before_it_idles() -> None:
    """What the idle tests rest on: every job of the scenario is over well before IDLE_UNTIL."""
    model: SessionModel = build_model(scenario(end_at=IDLE_UNTIL))
    assert all(job.status != "running" for job in model.timeline.jobs())
    span = model.timeline.time_span()
    assert span is not None and span[1] < T0 + END_AT
