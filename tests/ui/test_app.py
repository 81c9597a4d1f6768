"""Pilot tests of CuzkApp: start, screen keys, the quit dialog, errors, polling, palette, replay, themes,
the dashboard's proof counts and the waterfall's stepped live window."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.color import ColorSystem
from textual.content import Content
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import Input, Static

from cuzktui import events as ev
from cuzktui.collector import QuietCollections
from cuzktui.model import SessionModel
from cuzktui.ui.app import SCREENS, ActionsProvider, CuzkApp
from cuzktui.ui.modals import ConfirmModal, HelpScreen, QuitScreen
from cuzktui.ui.screens.dashboard import DashboardScreen
from cuzktui.ui.screens.knobs import KnobsScreen
from cuzktui.ui.theme import Palette, ThemeFileError, bundled_themes, drawn_variables, load_theme
from cuzktui.ui.widgets.charts import Chart
from cuzktui.ui.widgets.notices import NoticesList
from cuzktui.ui.widgets.panels import Panel, pipeline_content
from cuzktui.ui.widgets.waterfall import WaterfallView, lane_detail
from cuzktui.units import GiB, format_duration
from tests.ui.conftest import settle
from tests.ui.fakes import RESTART_AT, T0, FakeController, FakeReplay, Timed, build_model


def make_app(fake: FakeController, **options: object) -> CuzkApp:
    return CuzkApp(fake, poll_interval=1000, **options)  # type: ignore[arg-type]


async def test_starts_on_the_dashboard_with_identity_and_state(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)
        assert "cuzk-engine (embedded emulator)" in app.title
        assert app.sub_title == "ready"
        daemon = app.screen.query_one("#daemon", Panel)
        assert daemon._shown is not None and "EMULATOR" in daemon._shown.plain
        assert "READY" in daemon._shown.plain and "pid 4343" in daemon._shown.plain
        assert app.screen.query_one("#memory", Chart).spec is not None


async def test_number_keys_switch_through_every_screen(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for _mode, key, _label, screen_class in [*SCREENS[1:], SCREENS[0]]:
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, screen_class), key  # type: ignore[arg-type]


@pytest.mark.parametrize(("key", "stop"), [("s", True), ("l", False)])
async def test_quit_while_the_daemon_runs_asks_then_shuts_down_as_chosen(key: str, stop: bool) -> None:
    fake = FakeController(build_model([]), running=True)
    app = make_app(fake)
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen)
        assert "cuzk-tui attach" in str(app.screen.query_one("#quit-question").render())
        await pilot.press(key)
        await app.workers.wait_for_complete()
    assert fake.shutdowns == [stop]
    assert app.return_code == 0


async def test_cancelling_the_quit_dialog_keeps_everything_running() -> None:
    fake = FakeController(build_model([]), running=False)
    fake.bench_is_running = True
    app = make_app(fake)
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen)
        assert app.screen.running == ["a benchmark"]
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)
        assert fake.shutdowns == []


async def test_quit_with_nothing_running_leaves_at_once() -> None:
    fake = FakeController(build_model([]), running=False)
    app = make_app(fake)
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("q")
        await app.workers.wait_for_complete()
    assert fake.shutdowns == [False]


async def test_controller_errors_become_notifications_not_tracebacks() -> None:
    fake = FakeController(build_model([]))
    fake.start_error = RuntimeError("cuzk-daemon: no such file")
    fake.poll_error = ConnectionError("status endpoint refused")
    app = make_app(fake)
    async with app.run_test() as pilot:
        await settle(pilot)
        messages = [n.message for n in app._notifications]
        assert any("no such file" in m for m in messages)
        assert any("status endpoint refused" in m for m in messages)
        assert all(n.severity == "error" for n in app._notifications)
        assert app.is_running


async def test_screens_redraw_only_when_the_model_moved(events: list[Timed]) -> None:
    model = build_model(events)
    app = make_app(FakeController(model))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        calls = 0
        original = screen.refresh_from_model

        def counting() -> None:
            nonlocal calls
            calls += 1
            original()

        screen.refresh_from_model = counting  # type: ignore[method-assign]
        app.refresh_visible()
        assert calls == 0
        model.apply(events[-1][1])
        app.refresh_visible()
        app.refresh_visible()
        assert calls == 1


async def test_the_poll_never_overlaps_itself() -> None:
    release = asyncio.Event()

    class SlowPoll(FakeController):
        async def poll(self) -> bool:
            self.polls += 1
            if self.polls == 2:
                await release.wait()
            return False

    fake = SlowPoll(build_model([]))
    app = CuzkApp(fake, poll_interval=0.01)
    async with app.run_test() as pilot:
        while fake.polls < 2:
            await pilot.pause(0.02)
        for _ in range(5):  # several intervals pass while poll 2 hangs: no poll 3 starts
            await pilot.pause(0.02)
        assert fake.polls == 2
        release.set()
        while fake.polls < 3:
            await pilot.pause(0.02)


async def test_behind_a_flooding_log_the_app_polls_again_at_once_and_says_so() -> None:
    """While the controller has log left to read, the next poll comes at once (not a poll interval
    later) and the status line says how much is unread; once caught up, polls wait again."""
    release = asyncio.Event()
    mib = 1 << 20

    class Behind(FakeController):
        backlog = 3 * mib

        def log_backlog(self) -> int:
            return self.backlog

        async def poll(self) -> bool:
            self.polls += 1
            if self.polls == 2:
                await release.wait()
            self.backlog -= mib
            return True

    fake = Behind(build_model([]))
    app = make_app(fake)  # a poll interval of 1000 s: only the backlog brings the next poll
    async with app.run_test() as pilot:
        deadline = asyncio.get_running_loop().time() + 30
        while fake.polls < 2 and asyncio.get_running_loop().time() < deadline:
            await pilot.pause()
        assert fake.polls == 2
        assert app.sub_title.endswith(" · catching up on the log: 2 MiB unread")
        release.set()
        while fake.backlog and asyncio.get_running_loop().time() < deadline:
            await pilot.pause()
        for _ in range(5):
            await pilot.pause()
        assert fake.polls == 3 and "catching up" not in app.sub_title


async def test_after_each_poll_the_app_hands_its_collections_whether_it_is_behind_the_log() -> None:
    """The full collections wait for polls that are not behind a flooding log (collector.QuietCollections)."""

    class Told(QuietCollections):
        def __init__(self) -> None:
            super().__init__()
            self.behind: list[bool] = []

        def after_poll(self, behind: bool) -> bool:  # records only: the test process's collector is left alone
            self.behind.append(behind)
            return False

    class Behind(FakeController):
        backlog = 2

        def log_backlog(self) -> int:
            return self.backlog

        async def poll(self) -> bool:
            self.polls += 1
            self.backlog = max(0, self.backlog - 1)
            return True

    fake, told = Behind(build_model([])), Told()
    app = make_app(fake, collections=told)
    async with app.run_test() as pilot:
        deadline = asyncio.get_running_loop().time() + 30
        while len(told.behind) < 2 and asyncio.get_running_loop().time() < deadline:
            await pilot.pause()
    assert told.behind == [True, False]


async def test_the_palette_offers_every_bound_action(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test() as pilot:
        await settle(pilot)
        labels = [label for label, _help, _run in ActionsProvider(app.screen)._actions()]
        for _mode, key, label, _cls in SCREENS:
            assert f"{label} ({key})" in labels
        assert "Quit (q)" in labels
        assert not any(label.startswith("Play") for label in labels)  # live: no replay keys
        run = next(run for label, _help, run in ActionsProvider(app.screen)._actions() if label == "Waterfall (2)")
        run()
        await pilot.pause()
        assert app.current_mode == "waterfall"


async def test_the_palette_lists_each_command_once(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test() as pilot:
        await settle(pilot)
        ours = [label.rsplit(" (", 1)[0] for label, _help, _run in ActionsProvider(app.screen)._actions()]
        system = [command.title for command in app.get_system_commands(app.screen)]
        titles = ours + system
        assert "Quit" in titles and "Theme" in titles
        assert len(titles) == len(set(titles)), titles
        # Each said once: no help line repeating its name under it ("Dashboard (1)" / "Dashboard"), no
        # Textual "Keys" panel beside our Help, not the palette's own key from inside the palette.
        helps = [help_text for _label, help_text, _run in ActionsProvider(app.screen)._actions()]
        assert helps == [None] * len(helps)
        assert "Keys" not in system and "Help" in ours and "palette" not in ours


async def test_replay_shows_cursor_and_speed_and_plays_from_the_start(events: list[Timed]) -> None:
    fake = FakeReplay(build_model(events))
    app = make_app(fake)
    async with app.run_test() as pilot:
        await settle(pilot)
        assert app.sub_title == "ready · replay paused 5m / 5m x10 (space play, < > speed)"
        await pilot.press("space")
        assert fake.playing
        await pilot.press("greater_than_sign")
        assert fake.speed == 20
        await pilot.press("less_than_sign", "less_than_sign")
        assert fake.speed == 5
        assert app.sub_title.startswith("ready · replay playing")
        assert app.sub_title.endswith("x5 (space pause, < > speed)")
        await pilot.press("q")
        await app.workers.wait_for_complete()
    assert fake.shutdowns == [False]  # read-only: nothing to stop, no question


async def test_themes_ship_with_our_variables_and_ansi_themes_get_fallbacks() -> None:
    themes = {theme.name: theme for theme in bundled_themes()}
    assert {"cuzk-dark", "cuzk-light"} <= set(themes)
    assert not themes["cuzk-light"].dark
    for name in ("cuzk-light", "ansi-dark"):
        app = make_app(FakeController(SessionModel()), theme=name)
        async with app.run_test() as pilot:
            await settle(pilot)
            assert app.theme == name
            color = Palette.from_variables(app.theme_variables).fg("phase-gpu").color
            assert color is not None
            if name == "ansi-dark":
                assert app.theme_variables["phase-gpu"] == "ansi_green"
                assert color.is_default is False and color.number == 2  # stays a 16-colour index
                assert color.triplet is None
            else:
                assert color.triplet == (26, 127, 55)


@pytest.mark.parametrize("system", [ColorSystem.STANDARD, ColorSystem.EIGHT_BIT, ColorSystem.TRUECOLOR])
@pytest.mark.parametrize("theme", ["cuzk-dark", "cuzk-light", "ansi-dark", "ansi-light"])
async def test_every_phase_shows_a_distinct_colour_and_failure_one_of_its_own(theme: str, system: ColorSystem) -> None:
    app = make_app(FakeController(SessionModel()), theme=theme)
    async with app.run_test() as pilot:
        await settle(pilot)
        names = {"phase-synth", "phase-queue", "phase-gpu", "lane-idle"}
        variables = drawn_variables(app.theme_variables, app.current_theme.dark, system.name.lower())
        palette = Palette.from_variables(variables)
        shown = {name: palette.colors[name].rich_color.downgrade(system) for name in {*names, "phase-failed"}}
        assert len(set(shown.values())) == len(shown), shown
        assert shown["phase-failed"] not in {shown[name] for name in names}


async def test_a_light_theme_paints_the_charts_and_the_waterfall_its_own_background(events: list[Timed]) -> None:
    """Drawn by hand, charts and bars left the background unset: in a dark terminal a light theme
    showed dark charts under light panels. Every cell they draw now has the theme's background."""
    app = make_app(FakeController(build_model(events)), theme="cuzk-light")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        background = app.current_theme.background
        assert background is not None

        def unpainted(widget: Chart | WaterfallView) -> list[str]:
            return [
                segment.text
                for y in range(widget.size.height)
                for segment in widget.render_line(y)
                if segment.style is None or segment.style.bgcolor is None
            ]

        for chart in app.screen.query(Chart):
            assert unpainted(chart) == [], chart.id
            assert chart.render_line(chart.size.height - 1).cell_length == chart.size.width
        await pilot.press("2")
        await pilot.pause()
        view = app.screen.query_one(WaterfallView)
        assert unpainted(view) == []
        assert view.rich_style.bgcolor is not None and view.rich_style.bgcolor.triplet is not None
        assert view.rich_style.bgcolor.triplet.hex.lower() == background.lower()


async def test_an_unknown_theme_is_reported_and_the_default_used() -> None:
    app = make_app(FakeController(SessionModel()), theme="solarized-nope")
    async with app.run_test() as pilot:
        await settle(pilot)
        assert app.theme == "cuzk-dark"
        assert any("solarized-nope" in n.message for n in app._notifications)


def test_a_bad_theme_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nprimary = "#123456"\n[variables]\nphase-gpu = "not-a-colour"\n')
    with pytest.raises(ThemeFileError, match=r"bad\.toml: phase-gpu"):
        load_theme(bad)


async def test_no_color_leaves_charts_and_bars_uncoloured(monkeypatch: pytest.MonkeyPatch, events: list[Timed]) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.no_color
        chart = app.screen.query_one("#memory", Chart)
        lines = [chart.render_line(y) for y in range(chart.size.height)]
        # No series has a colour of its own: every cell has the widget's (which NO_COLOR's filter drops).
        assert {segment.style.color if segment.style else None for line in lines for segment in line} == {
            chart.rich_style.color
        }
        assert any("*" in line.text for line in lines)  # the RSS line drawn with its marker instead of a colour
        await pilot.press("2")
        await pilot.pause()
        view = app.screen.query_one(WaterfallView)
        assert any("=" in view.render_line(y).text for y in range(view.size.height))


async def test_ascii_mode_draws_without_glyphs(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)), ascii_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for selector in ("#memory", "#gpu-0"):
            chart = app.screen.query_one(selector, Chart)
            text = "\n".join(chart.render_line(y).text for y in range(chart.size.height))
            assert text.isascii(), selector
        await pilot.press("2")
        await pilot.pause()
        view = app.screen.query_one(WaterfallView)
        lines = [view.render_line(y).text for y in range(view.size.height)]
        assert all(line.isascii() for line in lines), lines
        assert any("=" in line and "#" in line for line in lines)


async def test_waterfall_groups_partitions_by_job_and_marks_the_restart(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await pilot.pause()
        rows = app.screen.query_one(WaterfallView).rows
        kinds = [row.kind for row in rows]
        assert kinds[:5] == ["job", "partition", "partition", "partition", "partition"]
        separators = [row for row in rows if row.kind == "segment"]
        # Named by why run 1 ended, and (an OOM kill) drawn as a failure.
        assert [(row.label, row.failure) for row in separators] == [("daemon run 2 · OOM kill", True)]
        jobs = [(row.label, row.job.status) for row in rows if row.kind == "job" and row.job is not None]
        assert ("porep-1000-3", "incomplete") in jobs and ("porep-1000-3", "completed") in jobs
        # The job the OOM kill took says so beside its bar, marked lost, not "?".
        view = app.screen.query_one(WaterfallView)
        killed = jobs.index(("porep-1000-3", "incomplete"))
        y = [i for i, row in enumerate(rows) if row.kind == "job"][killed] + 1 - int(view.scroll_y)
        line = view.render_line(y).text
        assert line.startswith("✗ porep-1000-3") and line.rstrip().endswith(" killed with the daemon (OOM)"), line


async def test_waterfall_enter_shows_a_partitions_timing_breakdown(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2", "down", "enter")
        await pilot.pause()
        detail = app.screen.query_one("#waterfall-detail", Panel)
        assert detail.has_class("-open") and detail._shown is not None
        text = detail._shown.plain
        assert "porep-1000-1 of daemon run 1  partition 0  worker 0" in text
        assert "mutex_held_ms=4120" in text and "prove_start_ms=4402" in text
        await pilot.press("escape")
        assert not detail.has_class("-open")


async def test_waterfall_lane_view_shows_workers_and_their_idle_time(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2", "l", "down", "enter")
        await pilot.pause()
        view = app.screen.query_one(WaterfallView)
        assert [row.label for row in view.rows] == ["worker 0", "worker 1"]
        detail = app.screen.query_one("#waterfall-detail", Panel)
        assert detail._shown is not None and "GPU worker 0  busy" in detail._shown.plain


async def show_waterfall(pilot: Pilot[None]) -> WaterfallView:
    """Settle, switch to the waterfall and return its view."""
    await settle(pilot)
    await pilot.press("2")
    await pilot.pause()
    return pilot.app.screen.query_one(WaterfallView)


async def test_waterfall_zoom_and_pan_stop_following_until_end(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        view = await show_waterfall(pilot)
        fitted = view.window()
        assert fitted is not None and view.follow and view.seconds_per_column is None
        await pilot.press("plus")
        zoomed = view.window()
        assert zoomed is not None and zoomed[1] - zoomed[0] < fitted[1] - fitted[0]
        await pilot.press("left")
        assert not view.follow
        panned = view.window()
        assert panned is not None and panned[1] < zoomed[1]
        await pilot.press("end")
        assert view.follow and view.window() == zoomed
        await pilot.press("0")
        assert view.window() == fitted


async def test_live_follow_keeps_the_newest_jobs_in_view_until_the_user_scrolls_up(events: list[Timed]) -> None:
    model = build_model(events, until=60)
    app = make_app(FakeController(model))
    async with app.run_test(size=(80, 24)) as pilot:
        view = await show_waterfall(pilot)
        assert len(view.rows) < view.size.height  # one job so far: everything fits

        def newest_visible() -> bool:
            return int(view.scroll_y) + view.size.height - 1 >= len(view.rows)

        for t, event in events:
            if T0 + 60 < t <= T0 + 200:
                model.apply(event)
        app.refresh_visible()
        await pilot.pause()
        assert len(view.rows) > view.size.height and view.scroll_y > 0 and newest_visible()
        await pilot.press("home", "pageup", "pageup")  # the operator reads the first jobs
        await pilot.pause()
        assert view.scroll_y == 0
        for t, event in events:
            if t > T0 + 200:
                model.apply(event)
        app.refresh_visible()
        await pilot.pause()
        assert view.scroll_y == 0  # not yanked away from what they read
        await pilot.press("end")
        await pilot.pause()
        assert view.follow and newest_visible()


async def test_the_time_axis_stays_within_the_session(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        view = await show_waterfall(pilot)
        span = view._model.timeline.time_span() if view._model is not None else None
        assert span is not None
        # Zoomed in once at the start of the session, live: the window must not reach before it.
        await pilot.press(*["plus"] * 3)
        live = view.window()
        assert live is not None
        await pilot.press(*["left"] * 40)  # far past the first event
        window = view.window()
        assert window is not None and window[0] == span[0] and not view.follow
        assert window[1] - window[0] == pytest.approx(live[1] - live[0])
        axis = view.render_line(0).text
        assert "-" not in axis.split(")", 1)[1] and "╵0s" in axis
        await pilot.press("right")  # one step back is one step, not 39 presses undoing the overshoot
        moved = view.window()
        assert moved is not None and moved[0] > span[0]
        await pilot.press(*["right"] * 40)
        assert view.follow and view.window() == live


async def test_waterfall_strips_are_cached_until_the_timeline_moves(events: list[Timed]) -> None:
    model = build_model(events[:-40])
    app = make_app(FakeController(model))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        view = app.screen.query_one(WaterfallView)
        first = view.render_line(3)
        assert view.render_line(3) is first
        for _t, event in events[-40:]:
            model.apply(event)
        app.refresh_visible()
        assert view.render_line(3) is not first


def test_proofs_line_counts_every_daemon_run_after_a_restart(events: list[Timed]) -> None:
    # Run 1 completed two proofs, then the daemon was relaunched: its /status counts from 0 again.
    model = build_model(events, until=RESTART_AT + 20)
    now = T0 + RESTART_AT + 20
    model.apply(ev.StatusSnapshot(now, 5.0, 58 * GiB, 0, 0, 0, 2, 0, 0, 0))
    assert len(model.timeline.segments) == 2 and model.status is not None
    text = pipeline_content(model).plain
    assert "Proofs 2 done · 0 failed" in text
    # The rate counts those same proofs over the session so far (engine start → now), and says so.
    span = now - (T0 + 1)
    assert f"{2 * 3600 / span:.1f}/h (last {format_duration(span)}, wall time)" in text
    assert "run 2: 0" in text
    # The whole scenario: 2 + 3 proofs over all of its 299 s (shorter than the 10-minute window).
    text = pipeline_content(build_model(events)).plain
    assert "Proofs 5 done" in text and f"{5 * 3600 / 299:.1f}/h (last 4m59s, wall time)" in text and "run 2: 3" in text
    assert "Bench  porep 5/5 · 1 restart · 62.9/h wall time · concurrency 2" in text  # the bench's own rate


def test_an_engine_s_rates_are_in_the_emulated_box_s_time_and_say_so(events: list[Timed]) -> None:
    # The same session from an engine at time_scale 0.02: its log ran 50x faster than the box it models.
    scaled: list[Timed] = []
    for t, event in events:
        if isinstance(event, ev.DaemonLaunched | ev.BenchStarted):
            event = replace(event, time_scale=0.02)
        scaled.append((t, event))
    text = pipeline_content(build_model(scaled)).plain
    box_span = 299 / 0.02
    assert f"{5 * 3600 / box_span:.1f}/h (last {format_duration(box_span)}, emulated box time)" in text
    assert "/h emulated box time · concurrency 2" in text


async def test_live_waterfall_window_grows_in_steps_and_repaints_only_changed_lines(events: list[Timed]) -> None:
    model = build_model(events, until=200)
    app = make_app(FakeController(model))
    async with app.run_test(size=(120, 40)) as pilot:
        view = await show_waterfall(pilot)
        window = view.window()
        assert window == (T0 + 1, T0 + 1 + 300)  # 199 s of session: a 5-minute axis
        painted: list[tuple[Region, ...]] = []
        original = view.refresh

        def recording(*regions: Region, **kwargs: Any) -> Any:
            painted.append(regions)
            return original(*regions, **kwargs)

        view.refresh = recording  # type: ignore[method-assign]
        for t, event in events:
            if T0 + 200 < t <= T0 + 212:
                model.apply(event)
        app.refresh_visible()
        assert view.window() == window  # the axis did not move
        assert painted and all(len(regions) == 1 and regions[0].height == 1 for regions in painted)
        running = {
            y
            for y in range(1, view.size.height)
            if (row := view.rows[y - 1 + int(view.scroll_y)] if y - 1 < len(view.rows) else None) is not None
            and row.job is not None
            and row.job.status == "running"
        }
        assert {regions[0].y for regions in painted} <= running  # only the bars of running jobs grew
        # Zoomed in and live, the window jumps a quarter of its width, not every second.
        await pilot.press("plus")
        zoomed = view.window()
        assert zoomed is not None
        model.apply(ev.Notice(T0 + 213, "info", "a second later"))
        assert view.window() == zoomed


async def test_lane_bars_name_each_hold_or_none_never_run_on(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2", "l")
        await pilot.pause()
        view = app.screen.query_one(WaterfallView)
        bars = view.render_line(1).text[view.label_width :]
        # Worker 0 proves job 1's p0 then p2 back to back: an edge between, no "1/p01/p2".
        holds = [hold for hold in bars.replace("·", " ").split() for hold in hold.split("▏") if hold]
        assert holds and all(hold in {"p0", "p1", "p2", "p3"} or "/p" in hold for hold in holds)
        assert all(hold.count("/") <= 1 for hold in holds)
        assert "▏" in bars


async def test_a_live_lane_leaves_the_future_blank_and_out_of_its_busy_share(events: list[Timed]) -> None:
    model = build_model(events, until=200)
    app = make_app(FakeController(model))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2", "l")
        await pilot.pause()
        view = app.screen.query_one(WaterfallView)
        start, end = view.window() or (0.0, 0.0)
        columns = view.size.width - view.label_width
        now_column = int((T0 + 200 - start) / ((end - start) / columns))
        bars = view.render_line(1).text[view.label_width :]
        assert "·" in bars[:now_column] and bars[now_column + 1 :].strip() == ""
        assert "of the shown 3m19s" in lane_detail(model, 0, (start, end)).plain


async def test_stop_and_quit_while_a_poll_is_scheduled_leaves_no_unawaited_coroutine() -> None:
    import gc
    import warnings

    fake = FakeController(build_model([]), running=True)
    app = make_app(fake)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with app.run_test() as pilot:
            await settle(pilot)
            # A poll tick queued, then "Stop and quit" in the same step: the quit cancels the queued poll.
            app._poll_tick()
            await app._leave(stop_daemon=True).wait()
        gc.collect()
    assert fake.shutdowns == [True]
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


async def test_a_failing_poll_is_said_once_and_its_recovery_once() -> None:
    fake = FakeController(build_model([]))
    fake.poll_error = ConnectionError("status endpoint refused")
    app = CuzkApp(fake, poll_interval=0.01)

    def said(text: str) -> int:
        return sum(text in str(n.message) for n in app._notifications)

    async with app.run_test() as pilot:
        deadline = asyncio.get_running_loop().time() + 30
        while fake.polls < 5 and asyncio.get_running_loop().time() < deadline:
            await pilot.pause(0.02)
        assert fake.polls >= 5
        assert said("status endpoint refused") == 1
        fake.poll_error = None
        while said("poll recovered") == 0 and asyncio.get_running_loop().time() < deadline:
            await pilot.pause(0.02)
        polls = fake.polls
        while fake.polls < polls + 3 and asyncio.get_running_loop().time() < deadline:
            await pilot.pause(0.02)
        assert said("poll recovered") == 1 and said("status endpoint refused") == 1


@pytest.mark.parametrize(("answer", "left"), [("n", False), ("y", True)])
async def test_quitting_with_unapplied_knob_edits_says_so_first(answer: str, left: bool) -> None:
    fake = FakeController(build_model([]), running=False)
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await pilot.pause()
        assert isinstance(app.screen, KnobsScreen)
        app.screen.field("memory.total_budget").query_one(Input).value = "150GiB"
        await pilot.pause()
        app.set_focus(None)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        assert "1 knob edit not applied" in str(app.screen.query_one("#confirm-question").render())
        assert "memory.total_budget" in str(app.screen.query_one("#confirm-detail").render())
        await pilot.press(answer)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert fake.shutdowns == ([False] if left else [])
        if not left:
            assert isinstance(app.screen, KnobsScreen)


async def test_after_starting_a_benchmark_number_keys_switch_screens() -> None:
    fake = FakeController(build_model([]), running=True)
    app = make_app(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await pilot.pause()
        field = app.screen.query_one("#bench-concurrency", Input)
        field.focus()
        field.value = "3"
        await pilot.press("ctrl+s")
        await app.workers.wait_for_complete()
        assert len(fake.benches) == 1
        await pilot.press("2")
        await pilot.pause()
        assert app.current_mode == "waterfall"
        assert field.value == "3"


async def test_no_color_legend_shows_the_bar_glyphs(events: list[Timed], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await pilot.pause()
        legend = app.screen.query_one("#waterfall-legend")
        shown = str(legend.render())
        assert "== synthesis" in shown and "-- waiting for GPU" in shown
        assert "## GPU prove" in shown and "XX failed" in shown
        # A job row's waits before synthesis and its run are keyed too, as drawn.
        assert ": queued" in shown and ". proof" in shown
        await pilot.press("l")  # the lanes view: its own key (a hold's name, the edge between two, idle)
        await pilot.pause()
        shown = str(legend.render())
        assert "## GPU prove" in shown and "17/p3 job …-17, partition 3" in shown
        assert "| the next proof" in shown and ". idle" in shown and "synthesis" not in shown


async def test_question_mark_opens_the_current_screens_help_and_escape_closes_it(events: list[Timed]) -> None:
    app = make_app(FakeController(build_model(events)))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("2", "question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").render())
        assert "where does each partition spend its time" in text
        assert "Zoom in" in text and "X failed" in text
        # The keys as the footer shows them: quitting is q (its ctrl+q twin is not shown there).
        assert "  q          Quit\n" in text and "ctrl+q" not in text and "^q" not in text
        await pilot.press("escape")
        await pilot.pause()
        assert app.current_mode == "waterfall" and not isinstance(app.screen, HelpScreen)


START_ERROR = (
    "the daemon did not start: the daemon exited before it was ready (error): Error: failed to load config "
    "/srv/cuzk/cuzk.toml: TOML parse error at line 3, column 1: invalid table header, expected `.`, `]`"
)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_a_start_error_stays_on_the_dashboard_in_full(size: tuple[int, int]) -> None:
    model = build_model([])
    model.apply(ev.Notice(T0, "warning", "a notice that must not push the error away"))
    model.apply(ev.StartFailed(T0 + 1, START_ERROR))
    app = make_app(FakeController(model))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        panel = app.screen.query_one("#start-error", Panel)
        assert panel.display and panel._shown is not None
        assert START_ERROR in panel._shown.plain
        # Wrapped, not cut: every word of it is on the screen.
        lines = [strip.text for strip in app.screen._compositor.render_strips()]
        shown = " ".join(" ".join(line.split()) for line in lines)
        assert "invalid table header, expected `.`, `]`" in shown and "NOT STARTED" in shown
        # A later launch clears it.
        model.apply(ev.DaemonLaunched(T0 + 2, "engine", 7, ("cuzk-engine",), None, "127.0.0.1:9820", None))
        app.refresh_visible()
        await pilot.pause()
        assert not panel.display


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_the_replay_status_line_is_whole_on_every_screen(events: list[Timed], size: tuple[int, int]) -> None:
    fake = FakeReplay(build_model(events))
    long_title = "replay of /home/operator/.local/state/cuzk-tui/sessions/2026-x-engine"
    fake._identity = replace(fake.identity, title=long_title)
    app = make_app(fake)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        for _mode, key, _label, _screen in SCREENS:
            await pilot.press(key)
            await pilot.pause()
            top = app.screen._compositor.render_strips()[0].text
            # The status (position, speed, keys) whole; the long title is what gives way.
            assert "ready · replay paused 5m / 5m x10 (space play, < > speed)" in top, (key, top)
            assert "cuzk-tui · repla" in top and top.rstrip().endswith("…"), (key, top)


LONG_NOTICE = (
    "cuzk.toml: memory.total_budget = 'auto' takes MemTotal (503 GiB) − safety_margin (8 GiB) = 495 GiB, above "
    "this cgroup's limit of 256 GiB: the kernel OOM-kills the daemon before its budget stops it; set "
    "total_budget = '240GiB' (the last words of a long notice)"
)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_every_notice_is_reachable_and_enter_opens_one_whole(size: tuple[int, int]) -> None:
    model = build_model([])
    model.apply(ev.Notice(T0, "warning", LONG_NOTICE))
    for i in range(1, 30):
        model.apply(ev.Notice(T0 + i, "info", f"notice {i}"))
    app = make_app(FakeController(model))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        notices = app.screen.query_one(NoticesList)
        assert notices.option_count == 30 and notices.notices[0].text == "notice 29"  # newest first
        collapsed = notices.region.height
        await pilot.press("n")
        await pilot.pause()
        assert app.focused is notices and notices.region.height > collapsed  # it grows to be read
        await pilot.press("end", "enter")  # the oldest: the long one
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        shown = app.screen.query_one("#help-text", Static).visual
        assert isinstance(shown, Content) and LONG_NOTICE in shown.plain and "WARNING" in shown.plain
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen) and notices.highlighted == 29
        await pilot.press("escape")  # out of the list: it gives the charts their room back
        await pilot.pause()
        assert app.focused is None and notices.region.height == collapsed
        # A new notice does not move the highlight off the one being read.
        model.apply(ev.Notice(T0 + 40, "error", "notice 30"))
        app.refresh_visible()
        await pilot.pause()
        assert notices.option_count == 31 and notices.highlighted_notice is not None
        assert notices.highlighted_notice.text == LONG_NOTICE
