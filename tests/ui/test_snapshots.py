"""SVG snapshots of the dashboard and the waterfall on the fixed scenario (tests/ui/fakes.py).

Everything drawn comes from the model: no clock, no timer fires (the poll interval is far away),
so the pictures only change when the drawing does. Update with ``pytest --snapshot-update``
and look at the report before committing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from cuzktui import events as ev
from cuzktui.ui.app import CuzkApp
from tests.ui.conftest import settle
from tests.ui.fakes import OOM_AT, T0, FakeController, FakeReplay, FixedBoxController, Timed, build_model
from tests.ui.test_screens_tune import search_snapshot

# What the benchmark's OOM recovery says when it lowers the budget (cuzktui.diagnosis.oom_verdict's words).
OOM_EXPLANATION = (
    "reservations that fit total_budget (200 GiB) did not fit the cgroup limit (256 GiB) beside the memory "
    "outside the budget was 158 GiB (RSS − reservations in use)"
)

SnapCompare = Callable[..., bool]


def app_for(events: list[Timed], until: float | None = None, **options: object) -> CuzkApp:
    return CuzkApp(FakeController(build_model(events, until)), poll_interval=1000, **options)  # type: ignore[arg-type]


def pressing(*keys: str) -> Callable[[Pilot[None]], object]:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press(*keys)
        await pilot.pause()

    return run_before


def test_dashboard(snap_compare: SnapCompare, events: list[Timed]) -> None:
    assert snap_compare(app_for(events), terminal_size=(120, 40), run_before=pressing())


# The four screens an operator tunes with, on the terminals they are used in: 80x24 in every one of
# them; truecolor dark, a 16-colour tmux (TERM=screen), NO_COLOR, and the light theme (whose charts
# and bars paint their own background in a dark terminal).
SCREEN_KEYS = {"dashboard": "1", "waterfall": "2", "knobs": "3", "bench": "4"}
TERMINALS = ["dark", "16-colours", "no-color", "light"]


def terminal_theme(terminal: str, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Set the environment up as ``terminal`` (one of TERMINALS); the theme to ask for (None: the default)."""
    if terminal == "16-colours":
        monkeypatch.setenv("TERM", "screen")
        monkeypatch.delenv("COLORTERM")
    elif terminal == "no-color":
        monkeypatch.setenv("NO_COLOR", "1")
    return "cuzk-light" if terminal == "light" else None


@pytest.mark.parametrize("terminal", TERMINALS)
@pytest.mark.parametrize("screen", list(SCREEN_KEYS))
def test_at_80x24(
    snap_compare: SnapCompare, events: list[Timed], monkeypatch: pytest.MonkeyPatch, screen: str, terminal: str
) -> None:
    app = app_for(events, theme=terminal_theme(terminal, monkeypatch))
    assert snap_compare(app, terminal_size=(80, 24), run_before=pressing(SCREEN_KEYS[screen]))


# cuzk-engine's waterfall as a newcomer reads it (issue 27): the axis and the details in the emulated box's
# time (the scenario recorded at time_scale 0.5), the legend's job-row glyphs, a partition's details open.
@pytest.mark.parametrize("terminal", ["dark", "16-colours", "light"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_engine_waterfall_in_box_time(
    snap_compare: SnapCompare,
    events: list[Timed],
    monkeypatch: pytest.MonkeyPatch,
    size: tuple[int, int],
    terminal: str,
) -> None:
    engine = [(t, dataclasses.replace(e, time_scale=0.5) if isinstance(e, ev.DaemonLaunched) else e) for t, e in events]
    app = app_for(engine, theme=terminal_theme(terminal, monkeypatch))
    assert snap_compare(app, terminal_size=size, run_before=pressing("2", "down", "enter"))


async def _editing_a_knob(pilot: Pilot[None]) -> None:
    await settle(pilot)
    await pilot.press("3")
    editor = pilot.app.screen.query_one("#knob-memory-total_budget Input", Input)
    editor.cursor_blink = False  # a blinking cursor is drawn or not by when the picture is taken
    editor.focus()
    editor.value = "180GiB"
    await pilot.pause()


# What a newcomer met (issue 27), one screen on each of the terminals operators use: the Bench screen's OOM
# note whole, Knobs with a field being edited (its badges, placeholders and "esc Leave field"), Tune's form
# and Memcheck's reasons at 80x24.
NEWCOMER: dict[str, tuple[tuple[int, int], str, Callable[[Pilot[None]], object]]] = {
    "bench-oom-note-120x40-light": ((120, 40), "light", pressing("4")),
    "knobs-editing-120x40-16-colours": ((120, 40), "16-colours", _editing_a_knob),
    "tune-80x24-dark": ((80, 24), "dark", pressing("8")),
    "memcheck-80x24-light": ((80, 24), "light", pressing("5", "tab")),
}


@pytest.mark.parametrize("shot", list(NEWCOMER))
def test_a_newcomers_terminals(
    snap_compare: SnapCompare, events: list[Timed], monkeypatch: pytest.MonkeyPatch, shot: str
) -> None:
    size, terminal, run_before = NEWCOMER[shot]
    explained = [
        (t, dataclasses.replace(e, explanation=OOM_EXPLANATION) if isinstance(e, ev.BenchRestart) else e)
        for t, e in events
    ]
    fake = FixedBoxController(build_model(explained))
    fake.tune = search_snapshot()
    app = CuzkApp(fake, poll_interval=1000, theme=terminal_theme(terminal, monkeypatch))
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_dashboard_after_an_oom_kill(snap_compare: SnapCompare, events: list[Timed]) -> None:
    assert snap_compare(app_for(events, until=OOM_AT + 1), terminal_size=(120, 40), run_before=pressing())


def test_dashboard_ascii_light(snap_compare: SnapCompare, events: list[Timed]) -> None:
    app = app_for(events, ascii_only=True, theme="cuzk-light")
    assert snap_compare(app, terminal_size=(100, 30), run_before=pressing())


def test_waterfall(snap_compare: SnapCompare, events: list[Timed]) -> None:
    assert snap_compare(app_for(events), terminal_size=(120, 40), run_before=pressing("2"))


def test_waterfall_selected_partition_details(snap_compare: SnapCompare, events: list[Timed]) -> None:
    assert snap_compare(app_for(events), terminal_size=(120, 40), run_before=pressing("2", "down", "enter"))


def test_waterfall_lanes(snap_compare: SnapCompare, events: list[Timed]) -> None:
    assert snap_compare(app_for(events), terminal_size=(120, 40), run_before=pressing("2", "l", "down", "enter"))


def test_waterfall_on_a_16_colour_terminal(
    snap_compare: SnapCompare, events: list[Timed], monkeypatch: pytest.MonkeyPatch
) -> None:
    # tmux's TERM=screen: the dark theme's GPU-queue amber must not turn into the failure red.
    monkeypatch.setenv("TERM", "screen")
    monkeypatch.delenv("COLORTERM")
    assert snap_compare(app_for(events), terminal_size=(120, 40), run_before=pressing("2"))


def test_replay_header_and_ansi_theme(snap_compare: SnapCompare, events: list[Timed]) -> None:
    app = CuzkApp(FakeReplay(build_model(events)), poll_interval=1000, theme="ansi-dark")
    assert snap_compare(app, terminal_size=(120, 40), run_before=pressing("2"))


def test_quit_dialog(snap_compare: SnapCompare, events: list[Timed]) -> None:
    assert snap_compare(app_for(events), terminal_size=(100, 30), run_before=pressing("q"))


def test_help_screen_at_80x24(snap_compare: SnapCompare, events: list[Timed]) -> None:
    assert snap_compare(app_for(events), terminal_size=(80, 24), run_before=pressing("2", "question_mark"))


def test_start_error_in_full_at_80x24_on_16_colours(snap_compare: SnapCompare, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "screen")
    monkeypatch.delenv("COLORTERM")
    model = build_model([])
    model.apply(ev.Notice(T0, "warning", "cuzk.toml: pipeline.max_parallel_synthesis = 18 overshoots the budget"))
    model.apply(
        ev.StartFailed(
            T0 + 1,
            "the daemon binary /opt/cuzk/bin/cuzk-daemon does not exist: nothing was launched "
            "(name another with --daemon, or run the embedded engine with --engine)",
        )
    )
    app = CuzkApp(FakeController(model), poll_interval=1000)
    assert snap_compare(app, terminal_size=(80, 24), run_before=pressing())


def test_replay_status_line_at_80x24_no_color(
    snap_compare: SnapCompare, events: list[Timed], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = CuzkApp(FakeReplay(build_model(events)), poll_interval=1000)
    assert snap_compare(app, terminal_size=(80, 24), run_before=pressing("2"))


def _with_a_long_notice(events: list[Timed]) -> FakeController:
    model = build_model(events)
    model.apply(
        ev.Notice(
            T0 + 300,
            "warning",
            "cuzk.toml: memory.total_budget = 'auto' takes MemTotal (503 GiB) − safety_margin (8 GiB) = 495 GiB, "
            "above this cgroup's limit of 256 GiB: the kernel OOM-kills the daemon before its budget stops it; "
            "set total_budget = '240GiB'",
        )
    )
    return FakeController(model)


def test_notices_list_open_at_80x24_light(snap_compare: SnapCompare, events: list[Timed]) -> None:
    app = CuzkApp(_with_a_long_notice(events), poll_interval=1000, theme="cuzk-light")
    assert snap_compare(app, terminal_size=(80, 24), run_before=pressing("n", "down", "down"))


def test_a_notice_in_full_at_80x24_no_color(
    snap_compare: SnapCompare, events: list[Timed], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = CuzkApp(_with_a_long_notice(events), poll_interval=1000)
    assert snap_compare(app, terminal_size=(80, 24), run_before=pressing("n", "enter"))
