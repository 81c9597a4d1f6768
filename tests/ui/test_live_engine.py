"""Pilot tests of the app on a REAL LiveController driving a real cuzk-engine (no fakes).

The operator's loop, as a person at the keyboard would run it: the app starts on the engine and
the daemon becomes ready; a 3-proof benchmark is started from the Bench screen (4, type count
and concurrency, ctrl+s); the waterfall (2) fills with 3 jobs x 10 partitions; a knob is edited
on the Knobs screen (3), applied (ctrl+s) and confirmed (y), which restarts the daemon with the
new value; a second benchmark lands in a new daemon run of the timeline; quitting with "stop"
leaves no process behind; and the recorded session replays (space plays from the start).

The engine runs fast and small (``time_scale`` 0.0005, ``memory_scale`` 1/65536, an explicit
``total_budget``) so the whole loop takes seconds on two shared cores. Every wait is for a model
condition with a deadline; every process started is stopped in teardown even when a test fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Container, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widgets import Input

from cuzktui import events as ev
from cuzktui.live import LiveController, LiveOptions
from cuzktui.replay import ReplayController
from cuzktui.session import iter_session_events
from cuzktui.supervisor import engine_program
from cuzktui.ui.app import CuzkApp
from cuzktui.ui.modals import ConfirmModal, QuitScreen
from cuzktui.ui.screens.bench import BenchScreen
from cuzktui.ui.screens.dashboard import DashboardScreen
from cuzktui.ui.screens.knobs import KnobsScreen
from cuzktui.ui.screens.waterfall import WaterfallScreen
from cuzktui.ui.theme import Palette
from cuzktui.ui.widgets.panels import Panel
from cuzktui.ui.widgets.waterfall import PHASES, WaterfallView
from tests.conftest import alive, fast_engine_config

pytestmark = pytest.mark.slow

SIZE = (120, 50)
PARTITIONS = 10  # a 32 GiB PoRep proof
READY_S = 60.0  # deadlines: generous for two busy shared cores; the loop normally takes seconds
BENCH_S = 120.0
SYNTH_KNOB = "pipeline.max_parallel_synthesis"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory for the unix socket (pytest's tmp_path can exceed the 108-byte limit)."""
    path = Path(tempfile.mkdtemp(prefix="cz-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def launched_pids(session_dir: Path) -> list[int]:
    """Every daemon pid the session recorded (the TUI's runs and the benchmark runner's)."""
    return [e.pid for e in iter_session_events(session_dir) if isinstance(e, ev.DaemonLaunched) and e.pid]


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        if not left:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


@dataclass
class Live:
    app: CuzkApp
    pilot: Pilot[None]
    controller: LiveController
    session_dir: Path
    config_file: Path

    async def until(self, condition: Callable[[], bool], what: str, timeout: float) -> None:
        """Let the app run until ``condition()`` holds; fail after ``timeout`` seconds saying what and why."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                notices = "\n".join(f"  {n.level}: {n.text}" for n in list(self.controller.model.notices)[-8:])
                raise AssertionError(f"not within {timeout:.0f} s: {what}\nlast notices:\n{notices}")
            await self.pilot.pause(0.1)

    async def until_ready(self, runs_above: int = 0) -> None:
        model = self.controller.model

        def ready() -> bool:
            d = model.daemon
            return (
                d.phase == "ready"
                and d.runs > runs_above
                and not self.controller.bench_running()
                and self.controller.daemon_running()
            )

        await self.until(ready, f"the TUI's daemon ready (run > {runs_above})", READY_S)

    async def show(self, key: str, screen: type[object]) -> None:
        await self.pilot.press(key)
        await self.until(lambda: isinstance(self.app.screen, screen), f"key {key} shows {screen.__name__}", 10)
        await self.pilot.pause()

    async def type_into(self, field: Input, text: str) -> None:
        """Focus a field, clear it and type, as a person at the keyboard does."""
        field.focus()
        await self.pilot.pause()
        await self.pilot.press("end", *["backspace"] * len(field.value), *text)
        assert field.value == text

    async def leave_field(self) -> None:
        """Tab out of the form, as a person must: while an Input has focus it takes the number keys."""
        for _ in range(100):
            if not isinstance(self.app.focused, Input):
                return
            await self.pilot.press("tab")
        raise AssertionError(f"tab never left the form fields (focus on {self.app.focused})")

    async def run_bench(self, count: int, concurrency: int) -> None:
        """Bench screen: type count and concurrency, ctrl+s; wait until it finished and the TUI has its daemon back."""
        await self.show("4", BenchScreen)
        screen = self.app.screen
        runs = self.controller.model.daemon.runs
        previous = self.controller.model.bench.bench_id if self.controller.model.bench else None
        await self.type_into(screen.query_one("#bench-count", Input), str(count))
        await self.type_into(screen.query_one("#bench-concurrency", Input), str(concurrency))
        await self.pilot.press("ctrl+s")
        await self.leave_field()
        model = self.controller.model

        def finished() -> bool:
            bench = model.bench
            return bench is not None and bench.bench_id != previous and bench.finished is not None

        await self.until(finished, f"a {count}-proof benchmark finished", BENCH_S)
        assert model.bench is not None and model.bench.finished is not None
        assert (model.bench.kind, model.bench.count, model.bench.concurrency) == ("porep", count, concurrency)
        assert model.bench.finished.outcome == "completed", model.bench.finished
        assert (model.bench.completed, model.bench.failed) == (count, 0)
        # The runner handed the daemon back: the TUI relaunched it (one run for the runner, one for the TUI).
        await self.until_ready(runs_above=runs + 1)


@contextlib.asynccontextmanager
async def live_app(options: LiveOptions, config_file: Path) -> AsyncIterator[Live]:
    """The app on a LiveController with ``options``; every process is stopped afterwards, pass or fail."""
    controller = LiveController(options)
    app = CuzkApp(controller, poll_interval=0.1)
    session_dir = options.session_dir
    assert session_dir is not None
    try:
        async with app.run_test(size=SIZE) as pilot:
            yield Live(app, pilot, controller, session_dir, config_file)
    finally:
        # Idempotent when the test already quit through the dialog.
        with contextlib.suppress(Exception):
            await controller.shutdown(stop_daemon=True)
        survivors = wait_gone(launched_pids(session_dir) if session_dir.exists() else [], 3)
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        bench = controller._bench_proc
        if bench is not None and bench.poll() is None:
            bench.kill()
            bench.wait(10)
        assert not survivors, f"daemons left running after shutdown(stop_daemon=True): {survivors}"


@pytest.fixture
async def live(tmp_path: Path, short_dir: Path) -> AsyncIterator[Live]:
    """The app on a LiveController over a fast engine."""
    config_file = tmp_path / "cuzk.toml"
    config_file.write_text(fast_engine_config(short_dir))
    options = LiveOptions(
        program=engine_program(), config_file=config_file, session_dir=tmp_path / "session", sample_interval=0.5
    )
    async with live_app(options, config_file) as running:
        yield running


def bar_cells(strip: Strip, phase_colours: Container[object]) -> int:
    """How many cells of a rendered waterfall row are painted in a phase colour."""
    return sum(
        len(segment.text) for segment in strip if segment.style is not None and segment.style.bgcolor in phase_colours
    )


async def test_starts_on_the_engine_and_the_daemon_becomes_ready(live: Live) -> None:
    app, controller = live.app, live.controller
    assert controller.identity.mode == "engine"
    assert "cuzk-engine (embedded emulator)" in app.title
    assert isinstance(app.screen, DashboardScreen)
    await live.until_ready()
    model = controller.model
    assert model.daemon.mode == "engine" and model.daemon.runs == 1
    assert model.daemon.listen.startswith("unix://") and model.daemon.status_url is not None
    assert model.configs and model.configs[-1].version == 1
    await live.until(lambda: app.sub_title == "ready", "the header line says ready", 10)
    panel = app.screen.query_one("#daemon", Panel)
    await live.until(
        lambda: panel._shown is not None and "READY" in panel._shown.plain, "the daemon panel says READY", 10
    )
    assert panel._shown is not None and "EMULATOR" in panel._shown.plain


async def test_bench_waterfall_knob_restart_then_the_session_replays(live: Live) -> None:
    app, controller = live.app, live.controller
    model = controller.model
    await live.until_ready()

    # -- a 3-proof benchmark from the Bench screen ------------------------------------------
    await live.run_bench(count=3, concurrency=2)
    first_jobs = [j for j in model.timeline.jobs() if j.status == "completed"]
    assert len(first_jobs) == 3
    assert all(sorted(j.partitions) == list(range(PARTITIONS)) for j in first_jobs)
    bench_segment = {j.segment for j in first_jobs}
    assert len(bench_segment) == 1
    summary = str(app.screen.query_one("#bench-summary").render())
    assert "completed 3 · failed 0" in summary and "proofs/hour" in summary

    # -- the waterfall shows a row per job and per partition, each with a visible bar -------
    await live.show("2", WaterfallScreen)
    view = app.screen.query_one(WaterfallView)
    await live.until(lambda: len(view.rows) > 0, "the waterfall has rows", 10)
    partition_rows = [r for r in view.rows if r.kind == "partition"]
    assert len(partition_rows) == 3 * PARTITIONS
    assert {r.job.job_id for r in view.rows if r.kind == "job" and r.job} == {j.job_id for j in first_jobs}
    palette = Palette.from_variables(app.theme_variables, app.no_color)
    colours = {palette.bg(PHASES[phase][0]).bgcolor for phase in ("synth", "queue", "gpu")}
    view.scroll_to(y=0, animate=False, immediate=True)
    await live.pilot.pause()
    painted = 0
    for y in range(1, view.size.height):
        row_index = int(view.scroll_y) + y - 1
        if row_index < len(view.rows) and view.rows[row_index].kind == "partition":
            assert bar_cells(view.render_line(y), colours) > 0, view.rows[row_index].label
            painted += 1
    assert painted == 3 * PARTITIONS  # 50 lines: every partition row is on screen

    # -- a knob edited on the Knobs screen, applied, confirmed: the daemon restarts ---------
    await live.show("3", KnobsScreen)
    knobs = app.screen
    assert isinstance(knobs, KnobsScreen)
    before = model.daemon.synth_worker_count
    assert before is not None
    wanted = 3 if before != 3 else 2
    runs = model.daemon.runs
    configs = len(model.configs)
    await live.type_into(knobs.field(SYNTH_KNOB).query_one(Input), str(wanted))
    assert knobs.changes() == {SYNTH_KNOB: wanted}
    await live.pilot.press("ctrl+s")
    await live.until(lambda: isinstance(app.screen, ConfirmModal), "the apply confirmation", 10)
    await live.pilot.press("y")
    await live.until_ready(runs_above=runs)
    await live.until(lambda: len(model.configs) > configs, "a ConfigApplied for the change", 10)
    applied = model.configs[-1]
    assert applied.changes == (f"{SYNTH_KNOB} = {wanted!r}",)
    assert f"max_parallel_synthesis = {wanted}" in Path(applied.path).read_text()
    assert f"max_parallel_synthesis = {wanted}" in live.config_file.read_text()  # saved for next time
    await live.until(
        lambda: model.daemon.synth_worker_count == wanted, f"`starting pipeline` shows {wanted} synth workers", 10
    )
    assert controller.config_values()[SYNTH_KNOB] == wanted
    await live.until(lambda: not knobs.changes(), "the form adopts the running value", 10)
    await live.leave_field()

    # -- the timeline continues: another benchmark lands in a later daemon run --------------
    restart_segment = len(model.timeline.segments) - 1
    await live.run_bench(count=2, concurrency=2)
    completed = [j for j in model.timeline.jobs() if j.status == "completed"]
    assert len(completed) == 5
    later = [j for j in completed if j not in first_jobs]
    assert len({j.segment for j in later}) == 1 and later[0].segment > restart_segment > min(bench_segment)
    await live.show("2", WaterfallScreen)
    view = app.screen.query_one(WaterfallView)
    await live.until(
        lambda: sum(r.kind == "partition" for r in view.rows) == 5 * PARTITIONS, "the new jobs in the waterfall", 10
    )
    assert any(r.kind == "segment" and r.segment and r.segment.index == later[0].segment for r in view.rows)

    # -- quit, stopping the daemon: nothing is left running ---------------------------------
    live_completed = model.timeline.completed
    await live.pilot.press("q")
    await live.until(lambda: isinstance(app.screen, QuitScreen), "the quit dialog", 10)
    await live.pilot.press("s")
    await app.workers.wait_for_complete()
    assert wait_gone(launched_pids(live.session_dir), 15) == []
    assert not controller.daemon_running() and not controller.bench_running()

    # -- the recorded session replays: opens on the whole, space plays from the start ------
    # Playback runs on a clock the test moves: where the cursor stands never depends on how
    # long a loaded machine took between two steps.
    wall = [0.0]
    replay = ReplayController(live.session_dir, clock=lambda: wall[0])
    replay_app = CuzkApp(replay, poll_interval=0.1)
    async with replay_app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 30
        while replay.span is None or replay.model.timeline.completed < live_completed:
            assert time.monotonic() < deadline, "the replay did not load the session"
            await pilot.pause(0.1)
        assert replay.model.timeline.completed == live_completed == 5
        assert replay.model.daemon.runs == model.daemon.runs
        span = replay.span
        assert span is not None and replay.cursor_t == span[1]
        await pilot.press("space")
        await pilot.pause()
        assert replay.playing
        assert replay.cursor_t is not None and replay.cursor_t < span[0] + (span[1] - span[0]) / 2
        assert replay.model.timeline.completed < live_completed  # back at the beginning
        start = replay.cursor_t
        wall[0] += 0.2  # at 10x: the cursor moves 2 s of the session
        while not (replay.cursor_t > start + 0.5):
            assert time.monotonic() < deadline, f"the replay cursor did not advance from {start}"
            await pilot.pause(0.1)
        assert replay.cursor_t <= start + 2.0 + 1e-6
        assert "replay playing" in replay_app.sub_title


async def test_cancelling_a_benchmark_while_its_daemon_starts_leaves_no_daemon(live: Live) -> None:
    controller, model = live.controller, live.controller.model
    await live.until_ready()
    ours = model.daemon.pid
    await live.show("4", BenchScreen)
    await live.pilot.press("ctrl+s")
    await live.until(
        lambda: model.daemon.runs == 2 and model.daemon.phase == "starting", "the runner's daemon starting", 30
    )
    runners_daemon = model.daemon.pid
    await live.pilot.press("ctrl+x")
    await live.pilot.pause()
    if model.daemon.pid == runners_daemon and model.daemon.phase == "ready":
        pytest.skip("the runner's daemon was ready before the cancel landed: not the case under test")
    await live.until_ready(runs_above=2)  # the runner ended; the TUI has its own daemon again
    assert runners_daemon is not None and runners_daemon != ours
    assert wait_gone([runners_daemon], 5) == [], f"the runner's daemon (pid {runners_daemon}) outlived the cancel"
    assert controller.daemon_running()
