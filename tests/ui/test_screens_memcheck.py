"""Memcheck screen: the report, its warnings, recommendations, and "apply recommended" into Knobs."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from typing import Literal

import pytest
from textual.widgets import DataTable, Input, ProgressBar, Static

from cuzktui import events as ev
from cuzktui import local
from cuzktui.planner import MemcheckReport
from cuzktui.system import ProbeProgress, ProbeResult
from cuzktui.ui.messages import ApplyRecommended
from cuzktui.ui.modals import ConfirmModal
from cuzktui.ui.screens.knobs import KnobsScreen
from cuzktui.ui.screens.memcheck import MemcheckScreen
from cuzktui.units import GiB
from tests.ui.conftest import last_column_shown
from tests.ui.fakes import FakeController, ScreenApp, memcheck_report


class RoutingApp(ScreenApp):
    """Routes ApplyRecommended the way the real app should: fill the Knobs form, show it."""

    def __init__(self, fake: FakeController) -> None:
        super().__init__(lambda: MemcheckScreen(fake, memcheck_report()), "memcheck")
        self.fake = fake

    def on_mount(self) -> None:
        # Textual also runs ScreenApp.on_mount (handlers run for every class of the MRO).
        self.install_screen(KnobsScreen(self.fake), "knobs")

    def on_apply_recommended(self, message: ApplyRecommended) -> None:
        knobs = self.get_screen("knobs")
        assert isinstance(knobs, KnobsScreen)
        self.switch_screen("knobs")
        knobs.fill(message.values)


async def test_report_warnings_and_recommendations_are_shown() -> None:
    fake = FakeController(config={"pipeline.max_parallel_synthesis": 12})
    app = ScreenApp(lambda: MemcheckScreen(fake, memcheck_report()), "memcheck")
    async with app.run_test(size=(120, 40)):
        screen = app.screen
        facts = str(screen.query_one("#memcheck-facts", Static).render())
        assert "effective RAM       256 GiB" in facts
        warnings = screen.query_one("#memcheck-warnings", Static)
        assert warnings.has_class("-shown")
        assert "cgroup limit 256 GiB is below host RAM" in str(warnings.render())
        assert "memlock" in str(warnings.render())
        table = screen.query_one(DataTable)
        names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert names[:2] == ["memory.total_budget", "pipeline.max_parallel_synthesis"]


async def test_apply_recommended_fills_the_knobs_form_without_applying() -> None:
    fake = FakeController()
    app = RoutingApp(fake)
    async with app.run_test(size=(120, 40)) as pilot:
        report = memcheck_report()
        await pilot.press("a")
        await pilot.pause()
        knobs = app.screen
        assert isinstance(knobs, KnobsScreen)
        budget = next(r.value for r in report.recommendations if r.key == "total_budget")
        assert knobs.field("memory.total_budget").query_one(Input).value == budget
        assert "memory.total_budget" in knobs.changes()
        assert fake.applied == []


async def test_at_80_columns_every_reason_is_whole_to_the_right() -> None:
    """At 80 columns the "why" column started at the screen's edge and was cut there (the rest only by
    scrolling sideways): it wraps in what the other columns leave, every word on the page."""
    fake = FakeController(config={"pipeline.max_parallel_synthesis": 12})
    report = memcheck_report()
    app = ScreenApp(lambda: MemcheckScreen(fake, report), "memcheck")
    async with app.run_test(size=(80, 90)) as pilot:  # tall: every row on one screen for the reading
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        table.scroll_visible(animate=False, immediate=True)
        await pilot.pause()
        assert table.max_scroll_x == 0, "nothing hidden to the right"
        shown = await last_column_shown(pilot, table)
        for recommendation in report.recommendations:
            assert " ".join(recommendation.reasoning.split()) in shown


def test_snapshot_memcheck(snap_compare: object) -> None:
    fake = FakeController(config={"pipeline.max_parallel_synthesis": 12})
    app = ScreenApp(lambda: MemcheckScreen(fake, memcheck_report()), "memcheck")
    assert snap_compare(app, terminal_size=(120, 40))  # type: ignore[operator]


@pytest.mark.parametrize("mode", ["real", "engine"])
async def test_report_is_gathered_in_a_worker_for_the_daemons_machine(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    asked: list[tuple[dict[str, object], bool, int | None, str | None]] = []

    def gather(
        config: dict[str, object], *, engine: bool, memory_limit_bytes: int | None, cgroup_path: str | None
    ) -> MemcheckReport:
        asked.append((config, engine, memory_limit_bytes, cgroup_path))
        return memcheck_report()

    monkeypatch.setattr(local, "memcheck_for", gather)
    fake = FakeController(mode=mode, config={"memory.safety_margin": "9GiB"})
    daemon_mode: Literal["real", "engine"] = "engine" if mode == "engine" else "real"
    launched = ev.DaemonLaunched(1.0, daemon_mode, 7, ("d",), None, "unix:///s", None, cgroup_path="/cg/box")
    fake.model.apply(replace(launched, memory_limit_bytes=1 << 30))
    app = ScreenApp(lambda: MemcheckScreen(fake), "memcheck")
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        ((config, engine, limit, cgroup),) = asked
        # The running config's margin and budget are judged; an engine's box (its cgroup) is described.
        assert config["memory.safety_margin"] == "9GiB" and engine is (mode == "engine")
        assert (limit, cgroup) == (1 << 30, "/cg/box")
        assert "effective RAM" in str(app.screen.query_one("#memcheck-facts", Static).render())
        notes = app.screen.query("#memcheck-note")
        assert ("emulates" in str(notes.first(Static).render())) if mode == "engine" else not notes


PROBED = ProbeResult(
    allocated_bytes=12 * GiB,
    target_bytes=12 * GiB,
    limit_source="MemAvailable",
    chunk_bytes=GiB,
    reached_target=True,
    killed=False,
    returncode=0,
    evidence=None,
    elapsed_s=41.5,
)


async def test_memprobe_asks_first_then_shows_its_progress_and_result() -> None:
    fake = FakeController()
    halfway = threading.Event()
    release = threading.Event()

    def probe(on_progress: ProbeProgress) -> ProbeResult:
        on_progress(0, 12 * GiB)
        on_progress(5 * GiB, 12 * GiB)
        halfway.set()
        assert release.wait(30), "the test never let the probe finish"
        return PROBED

    fake.memprobe = probe  # type: ignore[method-assign]  # never allocate gigabytes in a test
    app = ScreenApp(lambda: MemcheckScreen(fake, memcheck_report()), "memcheck")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal) and "30-60 s" in str(app.screen.detail)
        await pilot.press("y")
        assert await asyncio.to_thread(halfway.wait, 30)
        screen = app.screen
        bar = screen.query_one("#memprobe-bar", ProgressBar)
        status = screen.query_one("#memprobe-status", Static)
        for _ in range(200):  # the progress is posted from the probe's thread: wait for it to land
            await pilot.pause()
            if bar.progress == 5 * GiB:
                break
        assert (bar.progress, bar.total) == (5 * GiB, 12 * GiB)
        assert "allocated 5 GiB of 12 GiB" in str(status.render())
        await pilot.press("p")  # a second probe is refused while one runs
        assert not isinstance(app.screen, ConfirmModal)
        release.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = str(status.render())
        assert "reached the target after 41.5 s" in text and "12 GiB in 1 GiB chunks" in text
        assert bar.progress == 12 * GiB


def test_snapshot_memprobe_result_at_80x24_on_16_colours(snap_compare: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "screen")
    monkeypatch.delenv("COLORTERM")
    fake = FakeController()

    def probe(on_progress: ProbeProgress) -> ProbeResult:
        on_progress(0, 12 * GiB)
        return PROBED

    fake.memprobe = probe  # type: ignore[method-assign]

    async def probed(pilot: object) -> None:
        await pilot.press("p", "y")  # type: ignore[attr-defined]
        await pilot.app.workers.wait_for_complete()  # type: ignore[attr-defined]
        await pilot.pause()  # type: ignore[attr-defined]

    app = ScreenApp(lambda: MemcheckScreen(fake, memcheck_report()), "memcheck")
    assert snap_compare(app, terminal_size=(80, 24), run_before=probed)  # type: ignore[operator]
