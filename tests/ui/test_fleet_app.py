"""``cuzk-tui fleet`` over real recorders: engines emulating boxes of different sizes, one killed mid-test."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from cuzktui.fleet import Box, FleetMonitor, Reading, load_hosts, row_cells
from cuzktui.fleet_sources import EndpointSource
from cuzktui.ui.fleet_app import FleetApp
from tests.conftest import require_engine
from tests.recorders import Recorder, recorders

__all__ = ["recorders"]  # the fixture, imported for this module's tests

PROFILES = (128, 256, 512)


async def until(pilot: Pilot[None], what: str, check: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.1)


@pytest.mark.slow
async def test_a_killed_box_is_marked_unreachable_and_the_others_stay_live(
    recorders: Callable[..., Recorder], tmp_path: Path
) -> None:
    require_engine()
    boxes = {f"box{gib}": recorders(f"box{gib}", "--profile", str(gib), fast_memory=False) for gib in PROFILES}
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(
        "".join(
            f'[[box]]\nname = "{name}"\nmetrics = "127.0.0.1:{r.port}"\nprice_per_hour = {n + 1}.5\n'
            f'attach = "cuzk-tui attach unix://{r.session.parent / "cuzk.sock"}"\n'
            for n, (name, r) in enumerate(boxes.items())
        )
    )
    monitor = FleetMonitor(load_hosts(hosts), EndpointSource(timeout=2.0))
    app = FleetApp(monitor, poll_interval=0.3, source_label="test")
    async with app.run_test(size=(180, 20)) as pilot:

        def state(name: str) -> str:
            return app.row_of(name)[1]

        def all_up() -> bool:
            for r in boxes.values():
                assert r.proc.poll() is None, r.stderr()
            # An engine's RSS is its box's, read from its /status: until that answers, a box shows only its limit.
            return all(state(name) == "up" and not app.row_of(name)[4].startswith("—") for name in boxes)

        await until(pilot, "every box up with its RSS and limit", all_up)

        victim = boxes["box256"]
        victim.proc.kill()
        victim.proc.wait(timeout=30)
        killed_at = time.time()
        polls = app.polls
        await until(pilot, "box256 marked unreachable", lambda: state("box256").startswith("unreachable"), 60)
        # The view kept polling, and the live boxes stay up.
        await until(pilot, "two more polls", lambda: app.polls >= polls + 2, 60)
        assert state("box128") == "up" and state("box512") == "up"
        row = app.row_of("box256")
        assert "stale" in row[1]
        assert row[-1] != ""  # why it is unreachable
        views = {v.box.name: v for v in monitor.views}
        last = views["box256"].reading
        assert last is not None and last.t <= killed_at  # its last good figures, from before the kill, kept
        # (Its RSS may be missing from that reading: a /status read that timed out on a busy core leaves a gap.)
        assert last.limit_bytes is not None and row[4] == row_cells(views["box256"])[4] != "—"
        assert monitor.open_command(views["box256"]) == "box256 is unreachable: its dashboard cannot be opened now"
        assert monitor.open_command(views["box512"])[:2] == ("cuzk-tui", "attach")


class _Scripted:
    def __init__(self, answers: dict[str, Reading | str]) -> None:
        self.answers = answers

    def fetch_all(self, boxes: Sequence[Box], now: float) -> dict[str, Reading | str]:
        return {b.name: self.answers[b.name] for b in boxes}


async def test_sort_keys_reorder_and_enter_on_an_unreachable_box_says_why() -> None:
    answers: dict[str, Reading | str] = {
        "a": Reading(0.0, True, completed=0, rss_bytes=1.0, limit_bytes=4.0),
        "b": Reading(0.0, True, completed=0, rss_bytes=3.0, limit_bytes=4.0),
        "c": "connection refused",
    }
    boxes = [Box(name, attach=("true",)) for name in answers]
    app = FleetApp(FleetMonitor(boxes, _Scripted(answers)), poll_interval=60.0)
    async with app.run_test(size=(180, 20)) as pilot:
        await until(pilot, "the first poll", lambda: app.polls >= 1, 30)
        table = app.query_one(DataTable)

        def order() -> list[str]:
            return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]

        assert order() == ["a", "b", "c"]
        await pilot.press("s", "s", "s", "s")  # name -> state -> proofs/h -> price -> memory
        assert app.sort_key == "memory"
        await pilot.press("r")
        assert order() == ["b", "a", "c"]  # 75 % before 25 %, the unknown last
        await pilot.press("down", "down", "enter")
        assert [n.message for n in app._notifications] == ["c is unreachable: its dashboard cannot be opened now"]
