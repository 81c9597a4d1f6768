"""Model checkpoints (cuzktui.model_cache): a second read of a source, or of its grown self, gives what a
cold read of it gives while reading only what was appended; anything doubtful reads cold.

The logs are the real-format fixture tests/data/timeline_restart.log (two daemon runs, upstream's
format strings) cut and grown at line boundaries; sessions are written with SessionWriter."""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cuzktui import events as ev
from cuzktui import model_cache
from cuzktui import session as session_module
from cuzktui.cli import main
from cuzktui.export import build_chrome_trace
from cuzktui.replay import ReplayController
from cuzktui.report import build_report
from cuzktui.session import SessionReading, SessionWriter, load_session, resolve_source, resume_reading

FIXTURE = (Path(__file__).parent / "data" / "timeline_restart.log").read_bytes()
LINES = FIXTURE.splitlines(keepends=True)
HALF = len(LINES) // 2
T0 = 1777618800.0  # 2026-05-01T07:00:00Z, the fixture's first line


def _write(path: Path, data: bytes, mode: str = "wb") -> Path:
    with path.open(mode) as f:
        f.write(data)
    return path


def _figures(path: Path, cache: bool) -> tuple[dict[str, Any], dict[str, Any], list[ev.ObservedEvent], int, int]:
    """What report and export make of ``path`` and where the read started (bytes of the log skipped)."""
    starts: list[int] = []
    loaded, model = load_session(path, cache=cache, progress=lambda done, _: starts.append(done))
    _, phases = load_session(path, details=False, cache=cache)
    # report reads without the timing details (commands/report.py), export with them.
    report = build_report(phases, str(path))
    return report, build_chrome_trace(model.timeline, loaded.observed), loaded.observed, loaded.log_lines, starts[0]


def _replayed(path: Path, cache: bool) -> tuple[dict[str, Any], tuple[float, float] | None]:
    replay = ReplayController(path, cache=cache)
    replay.load()
    return build_report(replay.model, str(path)), replay.span


def _same_as_cold(path: Path) -> int:
    """Read ``path`` through the cache and cold; assert they agree; return where the cached read started."""
    *cached, start = _figures(path, cache=True)
    *cold, cold_start = _figures(path, cache=False)
    assert cached == cold and cold_start == 0
    assert _replayed(path, cache=True) == _replayed(path, cache=False)
    return start


def _entries() -> list[Path]:
    return sorted(model_cache.cache_dir().glob("*.ckpt"))


def test_a_second_read_of_a_log_resumes_at_its_end_and_equals_a_cold_read(tmp_path: Path) -> None:
    log = _write(tmp_path / "daemon.log", FIXTURE)
    assert _same_as_cold(log) == 0  # nothing stored yet: read from the start
    assert len(_entries()) == 3  # report's, export's (another option) and replay's
    assert all(os.stat(entry).st_mode & 0o777 == 0o600 for entry in _entries())
    assert os.stat(model_cache.cache_dir()).st_mode & 0o777 == 0o700
    stored = {entry: entry.stat().st_ino for entry in _entries()}
    assert _same_as_cold(log) == len(FIXTURE)  # the second read starts where the first ended
    assert {entry: entry.stat().st_ino for entry in _entries()} == stored  # nothing new: nothing rewritten


def test_a_grown_log_is_resumed_and_equals_a_cold_read_of_the_grown_log(tmp_path: Path) -> None:
    log = _write(tmp_path / "daemon.log", b"".join(LINES[:HALF]))
    first = _figures(log, cache=True)
    _write(log, b"".join(LINES[HALF:]), "ab")
    assert _same_as_cold(log) == len(b"".join(LINES[:HALF]))
    assert first[0] != _figures(log, cache=False)[0]  # the test has teeth: the grown half changes the report


def test_a_log_grown_by_less_than_its_checkpoint_keeps_it_and_a_longer_growth_stores_anew(tmp_path: Path) -> None:
    log = _write(tmp_path / "daemon.log", b"".join(LINES[:HALF]))
    _start(log)
    (entry,) = _entries()
    stored = entry.stat()
    _write(log, LINES[HALF], "ab")  # a line: cheaper to read again than to pickle the model again
    assert _start(log) == len(b"".join(LINES[:HALF]))
    assert entry.stat().st_ino == stored.st_ino
    while log.stat().st_size - len(b"".join(LINES[:HALF])) < stored.st_size:
        _write(log, b"".join(LINES[HALF:]), "ab")
    assert _start(log) == len(b"".join(LINES[:HALF]))
    assert entry.stat().st_ino != stored.st_ino
    assert _start(log) == log.stat().st_size


def test_a_log_cut_mid_line_then_completed_does_not_keep_the_exit_it_implied(tmp_path: Path) -> None:
    cut = len(LINES[HALF]) // 2
    log = _write(tmp_path / "daemon.log", b"".join(LINES[:HALF]) + LINES[HALF][:cut])
    report = _figures(log, cache=True)[0]
    assert any("the log ends mid-line" in str(e["evidence"]) for e in report["exits"])
    _write(log, LINES[HALF][cut:] + b"".join(LINES[HALF + 1 :]), "ab")
    _same_as_cold(log)
    assert not any("mid-line" in str(e) for e in _figures(log, cache=True)[0]["exits"])


def test_a_rewritten_log_of_the_same_size_is_read_cold(tmp_path: Path) -> None:
    log = _write(tmp_path / "daemon.log", FIXTURE)
    _figures(log, cache=True)
    # Rewritten in place (same inode, same size): the second daemon run's job is another one.
    rewritten = FIXTURE.replace(b"porep-1000-3", b"porep-1000-9")
    assert len(rewritten) == len(FIXTURE) and rewritten != FIXTURE
    with log.open("r+b") as f:
        f.write(rewritten)
    assert _same_as_cold(log) == 0
    assert "porep-1000-9" in json.dumps(_figures(log, cache=True)[0])
    # Rotated: a new file under the same name, the same bytes: another inode is another log.
    os.rename(log, tmp_path / "daemon.log.1")
    _write(log, rewritten)
    assert _figures(log, cache=True)[-1] == 0


@pytest.mark.parametrize("damage", ["open to others", "garbage", "truncated"])
def test_a_checkpoint_that_is_not_private_or_does_not_read_is_ignored(tmp_path: Path, damage: str) -> None:
    log = _write(tmp_path / "daemon.log", FIXTURE)
    _figures(log, cache=True)
    for entry in _entries():
        if damage == "open to others":
            os.chmod(entry, 0o644)
        elif damage == "garbage":
            _write(entry, b"\x80\x05garbage" * 100)
        else:
            _write(entry, entry.read_bytes()[:-100])
    assert _same_as_cold(log) == 0
    assert _figures(log, cache=True)[-1] == len(FIXTURE)  # the cold read replaced it with a good one


def test_no_cache_and_the_environment_switch_store_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _write(tmp_path / "daemon.log", FIXTURE)
    assert main(["report", str(log), "--json", "--no-cache"]) == 0
    assert main(["export", str(log), "-o", str(tmp_path / "trace.json"), "--no-cache"]) == 0
    monkeypatch.setenv(model_cache.ENV, "off")
    assert main(["report", str(log)]) == 0
    assert not model_cache.cache_dir().exists()
    monkeypatch.delenv(model_cache.ENV)
    assert main(["report", str(log), "--json"]) == 0
    assert len(_entries()) == 1  # the test has teeth: without them, report stores one
    capsys.readouterr()


def _start(path: Path) -> int:
    """Where a read of ``path`` (report's options) started: 0 cold, else the checkpoint's log offset."""
    starts: list[int] = []
    load_session(path, progress=lambda done, _: starts.append(done))
    return starts[0]


def test_the_cache_keeps_its_most_recently_used_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_cache, "MAX_ENTRIES", 2)
    logs = [_write(tmp_path / f"daemon{n}.log", FIXTURE) for n in range(3)]
    for n, log in enumerate(logs):
        before = set(_entries())
        assert _start(log) == 0
        (stored,) = set(_entries()) - before
        os.utime(stored, (n, n))  # used at time n (no clock in the test): log 0 least recently
    assert len(_entries()) == 2
    assert _start(logs[2]) == _start(logs[1]) == len(FIXTURE)
    assert _start(logs[0]) == 0  # the least recently used went


def test_what_a_killed_store_left_behind_goes_at_the_next_store(tmp_path: Path) -> None:
    log = _write(tmp_path / "daemon.log", FIXTURE)
    load_session(log)
    directory = model_cache.cache_dir()
    abandoned, in_progress = directory / ".x.ckpt.1.tmp", directory / ".y.ckpt.2.tmp"
    for path in (abandoned, in_progress):
        _write(path, b"half a checkpoint")
    os.utime(abandoned, (0, 0))
    load_session(_write(tmp_path / "other.log", FIXTURE))  # another checkpoint stored
    assert not abandoned.exists() and in_progress.exists()


def _session(tmp_path: Path, events: Sequence[ev.ObservedEvent], log: bytes) -> SessionWriter:
    session = SessionWriter.create(directory=tmp_path / "session")
    for event in events:
        session.append_event(event)
    _write(session.daemon_log_path, log, "ab")
    return session


def test_a_grown_session_is_resumed_and_merges_as_a_cold_read(tmp_path: Path) -> None:
    # events.jsonl runs ahead of the log (a notice at +9 s while the log is at +4 s): the log's lines
    # appended later with earlier times go before that notice, as they do in one whole read.
    notes = [ev.Notice(T0 + s, "info", f"note {s}") for s in (0.5, 3.0, 9.0)]
    session = _session(tmp_path, notes, b"".join(LINES[:HALF]))
    source = resolve_source(session.path)

    def sequence(cache: bool) -> list[tuple[float, ev.Event]]:
        seen: list[tuple[float, ev.Event]] = []
        reading, resumed = resume_reading(SessionReading(source), cache, ("test",), lambda: list(seen))
        seen = resumed if resumed is not None else seen
        seen.extend(reading)
        return seen

    before = sequence(cache=True)
    _same_as_cold(session.path)
    session.append_event(ev.Notice(T0 + 70.0, "info", "later"))
    _write(session.daemon_log_path, b"".join(LINES[HALF:]), "ab")
    assert sequence(cache=True) == sequence(cache=False)
    assert _same_as_cold(session.path) == len(b"".join(LINES[:HALF]))
    whole = sequence(cache=False)
    assert [e.text for _, e in whole if isinstance(e, ev.Notice)] == ["note 0.5", "note 3.0", "note 9.0", "later"]
    # The test has teeth: lines of the grown log go before events the first read had already placed.
    assert whole[: len(before)] != before


def test_a_session_whose_files_are_far_apart_in_time_is_read_whole_and_not_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # events.jsonl stops at +0.1 s while the log runs on: every later log line waits on events.jsonl,
    # beyond what a pass may hold (lowered here from its real bound): read as always, no checkpoint.
    session = _session(tmp_path, [ev.Notice(T0 + 0.1, "info", "early")], FIXTURE)
    with monkeypatch.context() as patch:
        patch.setattr(session_module, "_HELD_MAX", 3)
        assert _figures(session.path, cache=True)[:-1] == _figures(session.path, cache=False)[:-1]
        assert _entries() == []
    _figures(session.path, cache=True)
    assert len(_entries()) == 2  # the test has teeth: within the bound, both reads store one


def test_a_loaded_model_goes_to_the_collectors_oldest_generation(tmp_path: Path) -> None:
    log = _write(tmp_path / "daemon.log", FIXTURE)
    load_session(log)
    assert _start(log) == len(FIXTURE)  # resumed from the checkpoint
    _, model = load_session(log)
    assert any(o is model.timeline for o in gc.get_objects(generation=2))
