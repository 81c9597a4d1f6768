"""What the screens say about attaching, draining and leaving: the running config's source, the drain's
work in flight with "restart anyway", the quit dialog's list, and the header through a hand-over."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.widgets import Input, Static

from cuzktui import events as ev
from cuzktui.supervisor import BENCHMARK_OVER, HANDED_TO_BENCHMARK
from cuzktui.ui.app import CuzkApp
from cuzktui.ui.modals import ConfirmModal, QuitScreen
from cuzktui.ui.screens.knobs import KnobsScreen
from cuzktui.ui.widgets.panels import Panel
from tests.ui.conftest import settle
from tests.ui.fakes import T0, FakeController, ScreenApp, build_model


class _Attached(FakeController):
    """Attached without --config: the running config is unknown."""

    def running_config_source(self) -> str | None:
        return None


class _Draining(FakeController):
    """An apply that waits in its drain until "restart anyway"."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.forced = asyncio.Event()
        self.draining = False

    def drain_in_flight(self) -> list[str] | None:
        if not self.draining:
            return None
        return ["porep-1000-17: partitions: 2 synthesizing, 1 on the GPU for 1m20s (log)"]

    def restart_anyway(self) -> None:
        self.forced.set()

    async def apply_config(self, changes: Any) -> None:
        self.draining = True
        await self.forced.wait()
        self.draining = False
        await super().apply_config(changes)


def knobs(app: ScreenApp) -> KnobsScreen:
    assert isinstance(app.screen, KnobsScreen)
    return app.screen


async def test_attached_without_config_the_knobs_screen_says_the_running_config_is_unknown() -> None:
    app = ScreenApp(lambda: KnobsScreen(_Attached()), "knobs")
    async with app.run_test(size=(120, 40)):
        screen = knobs(app)
        assert "running config unknown" in str(screen.query_one("#knobs-status", Static).render())
        diff = str(screen.query_one("#knobs-diff", Static).render())
        assert "running config is unknown" in diff and "matches the running config" not in diff


async def test_the_drain_lists_what_is_in_flight_and_ctrl_k_restarts_anyway() -> None:
    fake = _Draining(config={"pipeline.max_parallel_synthesis": 12})
    fake.model.apply(ev.DaemonLaunched(T0, "engine", 1, ("cuzk-engine",), None, "127.0.0.1:9820", None))
    app = ScreenApp(lambda: KnobsScreen(fake), "knobs")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = knobs(app)
        screen.field("pipeline.max_parallel_synthesis").query_one(Input).value = "8"
        await pilot.pause()
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("y")
        deadline = asyncio.get_running_loop().time() + 10
        while "porep-1000-17" not in str(screen.query_one("#knobs-stage", Static).render()):
            assert asyncio.get_running_loop().time() < deadline, "the drain's list never showed"
            await pilot.pause(0.05)
        stage = str(screen.query_one("#knobs-stage", Static).render())
        assert "for 1m20s (log)" in stage and "ctrl+k restarts anyway" in stage
        assert fake.applied == []
        await pilot.press("ctrl+k")
        await asyncio.wait_for(app.workers.wait_for_complete(), 10)
        assert fake.forced.is_set() and fake.applied == [{"pipeline.max_parallel_synthesis": 8}]


class _LeavesRunning(FakeController):
    def left_running(self) -> list[str]:
        return ["the benchmark runner (pid 77) and its daemon (pid 78); the runner stops that daemon when it ends"]


async def test_the_quit_dialog_says_exactly_what_keeps_running() -> None:
    fake = _LeavesRunning(build_model([]), running=False)
    fake.bench_is_running = True
    app = CuzkApp(fake, poll_interval=1000)
    async with app.run_test() as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen)
        assert app.screen.running == fake.left_running()


async def test_the_header_explains_a_benchmark_hand_over_and_a_silent_daemon() -> None:
    model = build_model([])
    model.apply(ev.DaemonLaunched(T0, "engine", 5, ("cuzk-engine",), None, "unix:///s", None))
    model.apply(ev.DaemonReadyObserved(T0 + 1, 5, 1.0))
    model.apply(ev.DaemonExited(T0 + 2, 5, -15, 15, "stopped", ("killed by SIGTERM",), handover=HANDED_TO_BENCHMARK))
    fake = FakeController(model, running=False)
    app = CuzkApp(fake, poll_interval=1000)
    async with app.run_test() as pilot:
        await settle(pilot)
        assert app.sub_title.startswith("handed over to the benchmark runner")
        shown = app.screen.query_one("#daemon", Panel)._shown
        assert shown is not None and "HANDED OVER" in shown.plain and "DEAD" not in shown.plain + app.sub_title
        # The runner's daemon, stopped at the benchmark's end until the TUI launches its own: no death either.
        model.apply(ev.DaemonLaunched(T0 + 2.5, "engine", 6, ("cuzk-engine",), None, "unix:///s", None))
        model.apply(ev.DaemonExited(T0 + 2.8, 6, -15, 15, "stopped", ("killed by SIGTERM",), handover=BENCHMARK_OVER))
        app.refresh_visible()
        await settle(pilot)
        shown = app.screen.query_one("#daemon", Panel)._shown
        assert app.sub_title.startswith("handed back: the benchmark is over")
        assert shown is not None and "HANDED OVER" in shown.plain and "handed back" in shown.plain
        assert "DEAD" not in shown.plain and "SIGTERM" in shown.plain  # the evidence stays, dim
        model.apply(ev.DaemonLaunched(T0 + 3, "attached", None, (), None, "127.0.0.1:9820", None))
        model.apply(ev.DaemonLiveness(T0 + 4, False, "nothing answers at 127.0.0.1:9820 (GetStatus: refused)"))
        app.refresh_visible()
        assert app.sub_title.startswith("NOT ANSWERING")
