"""What the Controller protocol promises the UI, on the replay controller (no terminal)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuzktui.controller import BenchRequest, ControllerError
from cuzktui.replay import ReplayController


async def test_replay_refuses_with_the_one_controller_error(tmp_path: Path) -> None:
    replay = ReplayController(tmp_path / "missing")
    with pytest.raises(ControllerError, match="no such session directory or log file"):
        await replay.start()
    with pytest.raises(ControllerError, match="read-only"):
        await replay.apply_config({"memory.total_budget": "100GiB"})
    with pytest.raises(ControllerError, match="read-only"):
        await replay.start_bench(BenchRequest("porep", 1, 1))


def test_replay_offers_its_clock_and_nothing_to_reattach_to(tmp_path: Path) -> None:
    replay = ReplayController(tmp_path)
    assert replay.clock is replay
    assert replay.reattach_hint() == ""


def test_replay_lists_the_sessions_beside_it(tmp_path: Path) -> None:
    replay = ReplayController(tmp_path)
    assert replay.list_sessions(tmp_path / "none") == []
