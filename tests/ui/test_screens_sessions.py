"""Sessions screen: listing a sessions root, opening a replay, comparing two sessions."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from cuzktui import events as ev
from cuzktui.comparison import SessionSummary
from cuzktui.config import build_config
from cuzktui.session import SessionInfo, SessionWriter
from cuzktui.ui.messages import OpenReplay
from cuzktui.ui.screens.sessions import SessionsScreen
from cuzktui.units import GiB
from tests.ui.fakes import T0, FakeController, ScreenApp, bench_events


def record(root: Path, name: str, created: float, budget: str, events: list[ev.Event], **config: object) -> Path:
    writer = SessionWriter(root / name)  # not create(): its meta holds the host name and the time
    writer.write_meta({"label": name, "created": created, "mode": "engine"})
    writer.add_config_version(build_config({"memory.total_budget": budget, **config}))
    for event in events:
        assert not isinstance(event, ev.LogEvent)
        writer.append_event(event)
    writer.close()
    return writer.path


KILLED = (
    "Memory cgroup out of memory: Killed process 10 (cuzk-daemon) total-vm:279920000kB, "
    "anon-rss:267911168kB, file-rss:262144kB, shmem-rss:0kB"
)


def sessions_root(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    first = [
        ev.MemorySample(T0 + 1, 200 * GiB, cgroup_limit_bytes=256 * GiB),
        ev.MemorySample(T0 + 2, 250 * GiB, cgroup_limit_bytes=256 * GiB),
        # The spike before the kill, between two samples: only the kernel's line has it (255.75 GiB).
        ev.DaemonExited(T0 + 3, 10, -9, 9, "oom_kill", ("exit 137", KILLED)),
        *bench_events(),
        ev.BenchFinished(T0 + 230, "b1", 2, 1, 230.0, 31.3, "completed"),
    ]
    # An engine emulating a 256 GiB box with no cgroup: nothing kills it at 300 GiB, the real box would.
    second: list[ev.Event] = [
        ev.DaemonLaunched(T0, "engine", 11, (), None, "x", None, memory_scale=1 / 256, time_scale=0.02),
        ev.MemorySample(T0 + 1, 300 * GiB // 256),
        ev.BenchStarted(T0 + 5, "b2", "porep", 1, 1, 3, time_scale=0.02),
        ev.ProofFinished(T0 + 80, "b2", "porep-9", "porep", "COMPLETED", total_ms=70_000, wall_ms=75_000),
        ev.BenchFinished(T0 + 81, "b2", 1, 0, 76.0, 47.4, "completed", time_scale=0.02),
    ]
    record(root, "tiers-200g", T0, "200GiB", [e for e in first if not isinstance(e, ev.ProofSubmitted)])
    record(root, "tiers-150g", T0 + 3600, "150GiB", second, **{"engine.mem_total": "256GiB"})
    return root


def make_app(root: Path) -> ScreenApp:
    return ScreenApp(lambda: SessionsScreen(FakeController(), root), "sessions")


class ReplayApp(ScreenApp):
    def __init__(self, root: Path) -> None:
        super().__init__(lambda: SessionsScreen(FakeController(), root), "sessions")
        self.opened: list[Path] = []

    def on_open_replay(self, message: OpenReplay) -> None:
        self.opened.append(message.path)


async def test_lists_sessions_newest_first_and_opens_one(tmp_path: Path) -> None:
    root = sessions_root(tmp_path)
    app = ReplayApp(root)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        labels = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert labels == ["tiers-150g", "tiers-200g"]
        assert str(table.get_row_at(1)[4]) == "2 ok, 1 lost"  # its proofs by outcome
        await pilot.press("down", "enter")
        assert app.opened == [root / "tiers-200g"]


async def test_compare_two_marked_sessions(tmp_path: Path) -> None:
    app = make_app(sessions_root(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("c")
        assert any("mark two sessions" in str(n.message) for n in app._notifications)
        await pilot.press("space", "down", "space", "c")
        await app.workers.wait_for_complete()
        await pilot.pause()
        panel = app.screen.query_one("#sessions-compare", Static)
        assert panel.has_class("-shown")
        text = "\n".join(line.text for line in panel.render_lines(panel.region.reset_offset))
        # Columns named by session: both labels and their times, not "engine" twice.
        assert "2026-01-01 01:00 · tiers-150g · v001.toml" in text and "2026-01-01 00:00 · tiers-200g" in text
        assert "47.4 proofs/hour (emulated box time)" in text and "31.3 proofs/hour (wall time)" in text
        assert "memory.total_budget" in text and "150GiB" in text and "200GiB" in text
        assert "256 GiB of 256 GiB (100%)" in text and "the kernel's RSS at the OOM kill" in text
        assert "300 GiB ! above the box's 256 GiB RAM" in text
        await pilot.press("escape")
        assert not panel.has_class("-shown")


@pytest.mark.parametrize(
    ("size", "theme"), [((120, 40), None), ((80, 24), "textual-light")], ids=["120x40", "80x24-light"]
)
def test_snapshot_sessions_compare(
    snap_compare: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int], theme: str | None
) -> None:
    sessions_root(tmp_path)
    monkeypatch.chdir(tmp_path)  # the status line shows the root: keep it free of the tmp path
    root = Path("sessions")

    async def compare(pilot: object) -> None:
        app = pilot.app  # type: ignore[attr-defined]
        await app.workers.wait_for_complete()
        await pilot.pause()  # type: ignore[attr-defined]
        await pilot.press("space", "down", "space", "c")  # type: ignore[attr-defined]
        await app.workers.wait_for_complete()
        await pilot.pause()  # type: ignore[attr-defined]

    app = make_app(root)
    if theme is not None:
        app.theme = theme
    assert snap_compare(app, terminal_size=size, run_before=compare)  # type: ignore[operator]


def test_an_engine_sessions_memory_is_compared_in_the_units_of_its_box(tmp_path: Path) -> None:
    from cuzktui.comparison import summarize
    from cuzktui.session import read_session_info

    launched = ev.DaemonLaunched(
        t=T0, mode="engine", pid=1, command=(), config_path=None, listen="x", log_path=None,
        memory_limit_bytes=GiB, memory_scale=1 / 256,
    )  # fmt: skip
    path = record(tmp_path, "box", T0, "200GiB", [launched, ev.MemorySample(T0 + 1, GiB // 2)])
    info = read_session_info(path)
    assert info is not None
    summary = summarize(info)
    assert (summary.peak_rss_bytes, summary.limit_bytes) == (128 * GiB, 256 * GiB)


async def test_compare_says_which_session_it_is_reading(tmp_path: Path) -> None:
    fake = FakeController()
    second = threading.Event()
    release = threading.Event()
    summarize = fake.summarize_session

    def slow(info: SessionInfo) -> SessionSummary:
        if info.label == "tiers-200g":  # the second marked: hold it until the test has looked
            second.set()
            assert release.wait(30), "the test never let the comparison finish"
        return summarize(info)

    fake.summarize_session = slow  # type: ignore[method-assign]
    app = ScreenApp(lambda: SessionsScreen(fake, sessions_root(tmp_path)), "sessions")
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("space", "down", "space", "c")
        assert await asyncio.to_thread(second.wait, 30)
        panel = app.screen.query_one("#sessions-compare", Static)
        for _ in range(200):  # posted from the worker thread: wait for it to land
            await pilot.pause()
            if "Reading session 2 of 2" in str(panel.render()):
                break
        assert "Reading session 2 of 2: tiers-200g (" in str(panel.render())
        release.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = "\n".join(line.text for line in panel.render_lines(panel.region.reset_offset))
        assert "Reading" not in text and "peak memory vs limit" in text
