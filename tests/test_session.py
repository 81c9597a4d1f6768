"""Session recording and the one reader behind live following and replay."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import stat
from pathlib import Path

import pytest

from cuzktui import events as ev
from cuzktui import session as session_module
from cuzktui.bench import build_requests
from cuzktui.commands.progress import ProgressLine
from cuzktui.commands.sessions import format_sessions
from cuzktui.proto import proving_pb2 as pb
from cuzktui.replay import progress_bar
from cuzktui.session import (
    SessionFollower,
    SessionWriter,
    iter_session_events,
    list_sessions,
    read_session,
    resolve_source,
)
from cuzktui.supervisor import Supervisor, engine_program
from cuzktui.timeline import Timeline
from tests.conftest import engine_config_text, require_engine

STARTED = "2026-05-01T07:00:00.000000Z  INFO cuzk_core::engine: starting cuzk engine pipeline_enabled=true\n"
ASSEMBLED = (
    "2026-05-01T07:00:05.000000Z  INFO cuzk_core::engine: Phase 7: all partitions complete, proof assembled "
    "job_id=porep-1000-1 proof_len=1920 total_ms=5000 synth_ms=400 gpu_ms=30\n"
)
T0 = 1777618800.0  # 2026-05-01T07:00:00Z


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


def test_a_session_is_private(tmp_path: Path) -> None:
    session = SessionWriter.create("bench porep", root=tmp_path / "sessions")
    session.append_event(ev.Notice(T0, "info", "hello"))
    _, config = session.add_config_version("[pipeline]\nmax_parallel_synthesis = 4\n")
    fd = session.open_daemon_log()
    os.close(fd)
    assert session.path.parent == tmp_path / "sessions"
    assert session.path.name.endswith("-bench-porep")
    assert _mode(tmp_path / "sessions") == 0o700
    assert _mode(session.path) == 0o700
    assert _mode(session.config_dir) == 0o700
    for path in (session.events_path, session.meta_path, config, session.daemon_log_path):
        assert _mode(path) == 0o600, path


def test_config_versions_are_numbered_and_kept(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    first = session.add_config_version("a = 1\n")
    second = SessionWriter(tmp_path / "s").add_config_version("a = 2\n")  # another writer, e.g. the bench runner
    assert first == (1, tmp_path / "s" / "config" / "v001.toml")
    assert second == (2, tmp_path / "s" / "config" / "v002.toml")
    assert [p.read_text() for p in session.config_versions()] == ["a = 1\n", "a = 2\n"]


def test_events_round_trip_one_json_object_per_line(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    exited = ev.DaemonExited(T0, 42, -9, 9, "oom_kill", ("killed by SIGKILL", "oom_kill 0 → 1"))
    session.append_event(exited)
    session.append_event(ev.Notice(T0 + 1, "warning", "two\nlines"))
    lines = session.events_path.read_text("utf-8").splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["DaemonExited", "Notice"]
    assert list(iter_session_events(session.path)) == [exited, ev.Notice(T0 + 1, "warning", "two\nlines")]


def test_the_follower_returns_only_new_events_and_waits_for_whole_lines(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    follower = SessionFollower(session.path)
    assert follower.poll() == []
    _append(session.daemon_log_path, STARTED + ASSEMBLED[:40])
    first = follower.poll()
    assert [type(e) for e in first] == [ev.EngineStarted]
    _append(session.daemon_log_path, ASSEMBLED[40:])
    session.append_event(ev.Notice(T0 + 10, "info", "after"))
    second = follower.poll()
    assert [type(e) for e in second] == [ev.ProofAssembled, ev.Notice]
    assert isinstance(second[0], ev.ProofAssembled) and second[0].job_id == "porep-1000-1"
    assert follower.poll() == []


def test_log_and_observed_events_are_merged_in_time_order(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    session.append_event(ev.DaemonLaunched(T0 - 1, "engine", 7, ("cuzk-engine",), None, "unix:///x", None))
    session.append_event(ev.ProofSubmitted(T0 + 1, "b", "porep-1000-1", "porep"))
    session.append_event(ev.DaemonExited(T0 + 9, 7, -15, 15, "signal", ()))
    timeline = "TIMELINE,1500,SYNTH_START,porep-1000-1,partition=0\n"
    _append(session.daemon_log_path, STARTED + timeline + ASSEMBLED)
    kinds = [type(e).__name__ for e in iter_session_events(session.path)]
    # The TIMELINE line has no timestamp and stays right after its predecessor.
    assert kinds == [
        "DaemonLaunched", "EngineStarted", "TimelineEvent", "ProofSubmitted", "ProofAssembled", "DaemonExited",
    ]  # fmt: skip


def test_a_damaged_event_line_is_skipped_and_said_and_what_follows_is_read(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    good = [ev.ProofSubmitted(T0 + i, "b", f"porep-1000-{i}", "porep") for i in range(3)]
    for event in good[:2]:
        session.append_event(event)
    with session.events_path.open("ab") as f:
        f.write(b'{"type": "ProofSubmitted", "t": 17776\n')  # cut short by a crash
    session.append_event(good[2])
    replayed = list(iter_session_events(session.path))
    assert replayed[:2] == good[:2]
    assert len(replayed) == 4 and replayed[3] == good[2]
    notice = replayed[2]
    assert isinstance(notice, ev.Notice) and notice.level == "error"
    assert f"{session.events_path}: line 3 is damaged" in notice.text and "skipped" in notice.text


def test_a_write_torn_mid_file_is_skipped_counted_and_said_and_nothing_after_it_is_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cuzktui.cli import main

    session = SessionWriter(tmp_path / "s")
    _append(session.daemon_log_path, STARTED + ASSEMBLED)
    samples = [ev.MemorySample(T0 + i, (i + 1) << 30) for i in range(6)]
    for sample in samples[:2]:
        session.append_event(sample)
    # ENOSPC cut the third record's write short (no newline); once space was freed, the appends went
    # on, the next one on the torn record's line.
    torn = json.dumps(ev.to_record(samples[2]), separators=(",", ":")).encode()
    with session.events_path.open("ab") as f:
        f.write(torn[: len(torn) // 2])
    for sample in samples[3:5]:
        session.append_event(sample)
    with session.events_path.open("ab") as f:
        f.write(b"\x00\x00garbage\n")  # and a line of nothing at all
    session.append_event(samples[5])

    recorded = read_session(resolve_source(session.path))
    events = [event for _, event in recorded.events]
    assert [e for e in events if isinstance(e, ev.MemorySample)] == [*samples[:2], *samples[3:]]
    notices = [e.text for e in events if isinstance(e, ev.Notice)]
    assert len(notices) == 2
    assert f"{session.events_path}: line 3 is damaged" in notices[0] and "record written after it" in notices[0]
    assert f"{session.events_path}: line 5 is damaged" in notices[1]
    (damage,) = recorded.damage
    assert damage.startswith(f"{session.events_path}: 2 damaged lines skipped (the first: line 3 (")
    assert [e.job_id for e in events if isinstance(e, ev.ProofAssembled)] == ["porep-1000-1"]  # the log too

    assert main(["report", str(session.path), "--json"]) == 0
    err = capsys.readouterr().err
    assert f"cuzk-tui report: {damage}" in err.splitlines()


def test_an_unreadable_meta_json_or_config_version_is_said_and_the_rest_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cuzktui.cli import main

    session = SessionWriter(tmp_path / "s")
    _append(session.daemon_log_path, STARTED + ASSEMBLED)
    session.append_event(ev.MemorySample(T0, 1 << 30))
    session.add_config_version('[memory]\ntotal_budget = "400GiB"\n')
    _, broken = session.add_config_version("[memory\ntotal_budget = 1\n")  # torn mid-save, say
    session.meta_path.write_bytes(b'{"host": {"name": "box"')

    recorded = read_session(resolve_source(session.path))
    meta_problem, config_problem = recorded.damage
    assert meta_problem.startswith(f"{session.meta_path}: unreadable (") and "host, GPU and cgroup" in meta_problem
    assert config_problem.startswith(f"{broken}:1:") and "knobs of that daemon run are not known" in config_problem
    events = [event for _, event in recorded.events]
    notices = [e.text for e in events if isinstance(e, ev.Notice)]
    assert notices == [meta_problem, config_problem]
    assert ev.MemorySample(T0, 1 << 30) in events
    assert [e.job_id for e in events if isinstance(e, ev.ProofAssembled)] == ["porep-1000-1"]

    out = tmp_path / "trace.json"
    assert main(["export", str(session.path), "-o", str(out)]) == 0
    assert out.exists()
    err = capsys.readouterr().err.splitlines()
    assert f"cuzk-tui export: {meta_problem}" in err and f"cuzk-tui export: {config_problem}" in err


def test_a_truncated_last_line_is_damage_at_the_end_of_a_replay_but_pending_when_live(tmp_path: Path) -> None:
    session = SessionWriter(tmp_path / "s")
    session.append_event(ev.Notice(T0, "info", "kept"))
    with session.events_path.open("ab") as f:
        f.write(b'{"type": "Notice", "t": 1777618801.0, "lev')
    assert SessionFollower(session.path).poll() == [ev.Notice(T0, "info", "kept")]
    replayed = list(iter_session_events(session.path))
    assert replayed[0] == ev.Notice(T0, "info", "kept")
    assert isinstance(replayed[1], ev.Notice) and "line 2 is damaged" in replayed[1].text


def test_sessions_are_listed_with_their_proofs_by_outcome(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    older = SessionWriter.create("one", root=root, mode="engine")
    newer = SessionWriter.create("two", root=root, mode="real")
    failing = SessionWriter.create("three", root=root, mode="engine")
    older.write_meta({"created": T0})
    newer.write_meta({"created": T0 + 60})
    failing.write_meta({"created": T0 + 120})
    for status in ("COMPLETED", "COMPLETED", "FAILED", "LOST"):
        newer.append_event(ev.ProofFinished(T0, "b", "j", "porep", status))
    for _ in range(3):  # a benchmark whose every proof failed is not an empty session
        failing.append_event(ev.ProofFinished(T0, "b", "j", "porep", "FAILED"))
    (root / "not-a-session").mkdir()
    infos = list_sessions(root)
    assert [(i.path, i.mode, i.proofs_text) for i in infos] == [
        (older.path, "engine", "0 ok"),
        (newer.path, "real", "2 ok, 1 failed, 1 lost"),
        (failing.path, "engine", "0 ok, 3 failed"),
    ]
    assert infos[1].size_bytes >= newer.events_path.stat().st_size
    table = format_sessions(infos).splitlines()
    assert table[0].split() == ["CREATED", "MODE", "PROOFS", "SIZE", "SESSION"]
    assert table[2].endswith(str(newer.path)) and " real " in table[2] and " 2 ok, 1 failed, 1 lost " in table[2]


def _waterfall(timeline: Timeline) -> list[tuple[object, ...]]:
    """What the waterfall shows, as plain values: every job and its partitions' phase boundaries."""
    return [
        (
            job.segment, job.job_id, job.status, job.finished_at,
            tuple(
                (p.index, p.synth_start, p.synth_end, p.gpu_queue, p.gpu_pickup, p.gpu_start, p.gpu_end, p.worker,
                 p.synth_ms, p.gpu_ms)
                for p in sorted(job.partitions.values(), key=lambda p: p.index)
            ),
        )
        for job in timeline.jobs()
    ]  # fmt: skip


async def test_a_recorded_engine_run_replays_to_the_live_timeline(tmp_path: Path) -> None:
    require_engine()
    session = SessionWriter(tmp_path / "session")
    supervisor = Supervisor(session, engine_program(), listen=f"unix://{tmp_path}/d.sock", start_timeout=60)
    follower = SessionFollower(session.path)
    live = Timeline()

    def feed() -> None:
        for event in follower.poll():
            if not isinstance(event, ev.ObservedEvent):
                live.apply(event)

    try:
        await supervisor.start(engine_config_text(memory={"total_budget": "256GiB"}))
        proofs = asyncio.ensure_future(
            asyncio.gather(
                *(
                    supervisor.client.prove(r, timeout=120)
                    for r in build_requests("porep", 2, input_path=None, bench_id="r")
                )
            )
        )
        while not proofs.done():  # the TUI's live view: poll while the daemon writes
            feed()
            await asyncio.wait([proofs], timeout=0.05)
        results = proofs.result()
        await supervisor.stop()
    finally:
        await supervisor.close(stop=True)
        session.close()
    feed()
    assert [r.status for r in results] == [pb.AwaitProofResponse.COMPLETED] * 2
    replayed = Timeline()
    for event in iter_session_events(session.path):
        if not isinstance(event, ev.ObservedEvent):
            replayed.apply(event)
    assert live.completed == replayed.completed == 2
    assert _waterfall(replayed) == _waterfall(live)
    partitions = _waterfall(live)[0][4]
    assert isinstance(partitions, tuple) and len(partitions) == 10  # ten PoRep partitions, each with its phases


def test_reading_a_long_log_reports_its_progress_up_to_the_whole_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_module, "_READ_CHUNK", 1 << 12)  # many blocks out of a small file
    log = tmp_path / "daemon.log"
    _append(log, STARTED + "".join(f"TIMELINE,{n},SYNTH_START,porep-1000-{n},partition=0\n" for n in range(10_000)))
    size = log.stat().st_size
    calls: list[tuple[int, int]] = []
    recorded = read_session(resolve_source(log), progress=lambda done, total: calls.append((done, total)))
    assert len(recorded.events) == 10_001
    assert {total for _, total in calls} == {size}
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[0] < size and done[-1] == size
    assert len(calls) >= 3  # not just a start and an end


def _terminal_line(written: str) -> str:
    """What a terminal shows on the line after ``written`` (carriage returns and erase-to-end only)."""
    cells: list[str] = []
    cursor = 0
    for part in re.split(r"(\r|\x1b\[K)", written):
        if part == "\r":
            cursor = 0
        elif part == "\x1b[K":
            del cells[cursor:]
        else:
            cells[cursor : cursor + len(part)] = part
            cursor += len(part)
    return "".join(cells)


def test_a_progress_line_is_redrawn_in_place_and_leaves_nothing_in_the_shell() -> None:
    stream = io.StringIO()
    with ProgressLine("reading ", stream) as progress:
        progress(1024, 2048)
        assert _terminal_line(stream.getvalue()).startswith("reading [###############---------------]  50%")
        progress(2048, 2048)
        progress(2048, 2048)  # a load reads in passes: the bar may reach its end more than once
        assert "\n" not in stream.getvalue() and _terminal_line(stream.getvalue()).startswith("reading [####")
    assert _terminal_line(stream.getvalue()) == "", "after quitting the shell shows no 'reading [####] 100%'"
    untouched = io.StringIO()
    with ProgressLine("reading ", untouched):
        pass  # not a terminal: never drawn, nothing to erase
    assert untouched.getvalue() == ""


def test_the_progress_bar_says_how_far_the_reading_is() -> None:
    assert progress_bar(0, 2048, width=10) == "[----------]   0%  0 B of 2 KiB"
    assert progress_bar(1024, 2048, width=10) == "[#####-----]  50%  1 KiB of 2 KiB"
    assert progress_bar(0, 0, width=4) == "[####] 100%  0 B of 0 B"
