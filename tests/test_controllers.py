"""What the Controller protocol promises the UI, on the replay controller (no terminal)."""

from __future__ import annotations

import asyncio
import gc
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuzktui import events as ev
from cuzktui import replay as replay_module
from cuzktui import session as session_module
from cuzktui.controller import BenchRequest, ControllerError, PollBackoff
from cuzktui.model import SessionModel, model_of
from cuzktui.replay import ReplayController
from cuzktui.report import build_report
from cuzktui.session import Progress, SessionReading, SessionWriter, read_session, resolve_source


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
FIXTURE_T0 = 1777618800.0  # 2026-05-01T07:00:00Z, its first line


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


def _passes_from_the_start(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Counts the readings of the source from its start (the load's, and each seek's that restores no
    keyframe): one entry each."""
    started: list[float] = []
    reading = ReplayController._reading

    def counted(self: ReplayController, progress: Progress | None = None) -> SessionReading:
        started.append(0.0)
        return reading(self, progress)

    monkeypatch.setattr(ReplayController, "_reading", counted)
    return started


def _shown_at(source: Path) -> Callable[[float], tuple[dict[str, Any], list[ev.Notice]]]:
    """What the events of ``source`` up to a time make (report and notices), from one whole pass kept."""
    recorded = read_session(resolve_source(source)).events
    log = str(source) if source.is_file() else None

    def shown(t: float) -> tuple[dict[str, Any], list[ev.Notice]]:
        return _shown(model_of((e for key, e in recorded if key <= t), log_source=log))

    return shown


def _shown(model: SessionModel) -> tuple[dict[str, Any], list[ev.Notice]]:
    return build_report(model, "replay"), list(model.notices)


def test_a_seek_restores_the_latest_keyframe_before_it_and_shows_what_the_events_up_to_it_make(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(replay_module, "KEYFRAME_MIN_BYTES", 1)  # a keyframe each 1/8 of the small fixture
    started = _passes_from_the_start(monkeypatch)
    now = [0.0]
    replay = ReplayController(FIXTURE, clock=lambda: now[0], cache=False)
    replay.load()
    shown = _shown_at(FIXTURE)
    span = replay.span
    assert span is not None and _shown(replay.model) == shown(span[1])
    quarter, middle = span[0] + (span[1] - span[0]) / 4, (span[0] + span[1]) / 2
    # Back, far forward, back a little, forward a little: from keyframes, never from the start.
    for t in (middle, span[1], quarter, middle, middle + 1.0, quarter - 1.0, span[1] - 0.5):
        replay.seek(t)
        assert _shown(replay.model) == shown(t), t
    assert len(started) == 1  # the load's
    replay.seek(span[0])  # before the first keyframe: from the start
    assert len(started) == 2 and _shown(replay.model) == shown(span[0])
    assert _shown(replay.model) != shown(middle)  # the test has teeth
    # Playing goes on from a restored keyframe as from a whole pass.
    replay.seek(middle)
    replay.play(1.0)
    now[0] += 30.0  # past the daemon restart (the log is quiet from +18 s to +60 s)
    assert asyncio.run(replay.poll())
    assert replay.cursor_t == middle + 30.0 and _shown(replay.model) == shown(middle + 30.0)


def test_keyframes_added_over_many_resumes_stay_bounded_ordered_and_spread_to_the_latest() -> None:
    # A log regrown and replayed again and again adds keyframes to its checkpoint's each time: past twice
    # KEYFRAMES every other one goes, so a seek still reads at most a few stretches and memory stays bounded.
    cap = 2 * replay_module.KEYFRAMES
    keyframes: list[replay_module.Keyframe] = []
    for n in range(1, 20 * cap):
        replay_module._keep(keyframes, replay_module.Keyframe(float(n), b""))
        times = [keyframe.t for keyframe in keyframes]
        assert len(times) <= cap and times[-1] == n and times == sorted(times), n
        if n >= cap:  # the log stays covered: no stretch much longer than an even share of it
            gaps = [b - a for a, b in itertools.pairwise([0.0, *times])]
            assert max(gaps) <= 2 * n / cap, (n, times)


def test_a_seek_back_leaves_no_model_for_the_collector_to_find(monkeypatch: pytest.MonkeyPatch) -> None:
    # A model's jobs and partitions refer to one another: the one a seek replaces is freed by the seek, not
    # whenever the collector next runs over everything (a few seeks would hold a few models meanwhile).
    monkeypatch.setattr(replay_module, "KEYFRAME_MIN_BYTES", 1)
    replay = ReplayController(FIXTURE, cache=False)
    replay.load()
    span = replay.span
    assert span is not None
    for t in ((span[0] + span[1]) / 2, span[0]):  # to a keyframe, then from the start
        gc.collect()
        replay.seek(t)
        assert gc.collect() == 0, t


def test_a_session_replay_seeks_from_keyframes_its_log_and_events_read_in_stretches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # events.jsonl beside the log all along; read in small slices, so that each keyframe's pass reads
    # several of them, only as far as the log's stretch reaches.
    monkeypatch.setattr(replay_module, "KEYFRAME_MIN_BYTES", 1)
    monkeypatch.setattr(session_module, "_READ_CHUNK", 256)
    started = _passes_from_the_start(monkeypatch)
    session = SessionWriter.create(directory=tmp_path / "session")
    for n in range(36):
        session.append_event(ev.Notice(FIXTURE_T0 + 0.25 + 2 * n, "info", f"note {n}"))
    session.daemon_log_path.write_bytes(FIXTURE.read_bytes())
    replay = ReplayController(session.path, cache=False)
    replay.load()
    shown = _shown_at(session.path)
    span = replay.span
    assert span is not None and _shown(replay.model) == shown(span[1])
    middle = (span[0] + span[1]) / 2
    for t in (middle, span[0] + 5.0, span[1], middle - 3.0, middle + 20.0):
        replay.seek(t)
        assert _shown(replay.model) == shown(t), t
    assert len(started) == 1
    assert _shown(replay.model)[1] != shown(middle)[1]  # the test has teeth: the notices differ too


def test_a_replay_resumed_from_its_checkpoint_seeks_from_the_keyframes_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay_module, "KEYFRAME_MIN_BYTES", 1)
    log = tmp_path / "daemon.log"
    log.write_bytes(FIXTURE.read_bytes())
    ReplayController(log).load()  # stores the checkpoint
    started = _passes_from_the_start(monkeypatch)
    progress: list[int] = []
    replay = ReplayController(log)
    replay.load(lambda done, _: progress.append(done))
    assert progress[0] == log.stat().st_size  # resumed at the end: nothing read again
    span = replay.span
    assert span is not None
    shown = _shown_at(log)
    middle = (span[0] + span[1]) / 2
    replay.seek(middle)
    assert _shown(replay.model) == shown(middle)
    assert len(started) == 1  # the load's, resumed: the seek restored a keyframe from the checkpoint
