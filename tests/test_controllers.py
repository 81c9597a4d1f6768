"""What the Controller protocol promises the UI, on the replay controller (no terminal)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuzktui.controller import BenchRequest, ControllerError, PollBackoff
from cuzktui.model import model_of
from cuzktui.replay import ReplayController
from cuzktui.report import build_report
from cuzktui.session import read_session, resolve_source


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


def test_a_failing_poll_backs_off_and_is_said_once_then_recovery_once() -> None:
    backoff = PollBackoff(1.0, ceiling=8.0)
    assert backoff.delay() == 1.0 and backoff.succeeded() is None
    said = [backoff.failed(OSError("connection refused")) for _ in range(6)]
    assert said[0] is not None and "connection refused" in said[0] and "8 s" in said[0]
    assert said[1:] == [None] * 5
    assert backoff.delay() == 8.0  # doubled per failure, held at the ceiling
    recovered = backoff.succeeded()
    assert recovered == "poll recovered after 6 failed attempts"
    assert backoff.succeeded() is None and backoff.delay() == 1.0
    assert backoff.failed(OSError("again")) is not None  # a new run of failures is said again
    assert backoff.delay() == 2.0


FIXTURE = Path(__file__).parent / "data" / "timeline_restart.log"


def test_replay_keeps_no_event_yet_shows_at_each_time_what_the_events_up_to_it_make() -> None:
    # The reference: every event kept, and the model of those up to the cursor built afresh.
    recorded = read_session(resolve_source(FIXTURE)).events
    replay = ReplayController(FIXTURE, clock=lambda: 0.0)
    replay.load()
    span = replay.span
    assert span is not None and (span[0], span[1]) == (recorded[0][0], recorded[-1][0])
    whole = build_report(model_of((e for _, e in recorded), log_source=str(FIXTURE)), "log")
    assert build_report(replay.model, "log") == whole
    middle = (span[0] + span[1]) / 2
    # Back, forth, back again: each seek before the cursor reads the log again from its start.
    for t in (middle, span[0], span[1], middle, middle + 1.0):
        replay.seek(t)
        upto = model_of((e for key, e in recorded if key <= t), log_source=str(FIXTURE))
        assert build_report(replay.model, "log") == build_report(upto, "log"), t
    replay.seek(span[0])
    assert build_report(replay.model, "log") != whole  # the test has teeth: the start is not the end
