"""export: the Chrome trace of a timeline and samples, and the ``cuzk-tui export`` command."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from cuzktui.cli import main
from cuzktui.events import (
    DaemonLaunched,
    EngineStarted,
    GpuSample,
    MemorySample,
    Notice,
    ObservedEvent,
    TimelineEvent,
    to_record,
)
from cuzktui.export import build_chrome_trace, write_chrome_trace
from cuzktui.logparse import parse_line
from cuzktui.timeline import Timeline, run_number
from cuzktui.units import GiB

FIXTURE = Path(__file__).parent / "data" / "timeline_restart.log"


def fed() -> Timeline:
    timeline = Timeline()
    for line in FIXTURE.read_text().splitlines():
        timeline.apply(parse_line(line))
    return timeline


def x_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def test_one_complete_event_per_finished_phase_per_partition() -> None:
    timeline = fed()
    trace = json.loads(json.dumps(build_chrome_trace(timeline)))
    keys = Counter(
        (e["args"].get("daemon_run", 1), e["args"]["job"], e["args"]["partition"], e["name"]) for e in x_events(trace)
    )
    expected = set()
    for job in timeline.jobs():
        for p in job.partitions.values():
            for name, start, end in (
                ("synthesis", p.synth_start, p.synth_end),
                ("gpu queue", p.gpu_queue, p.gpu_pickup),
                ("gpu", p.gpu_start, p.gpu_end),
            ):
                if start is not None and end is not None:
                    expected.add((run_number(job.segment), job.job_id, p.index, name))
    assert set(keys) == expected
    assert set(keys.values()) == {1}
    # The fixture: 7 partitions with all three phases, the killed run's p0 without its GPU end.
    assert len(keys) == 7 * 3 + 2


def test_phase_event_times_and_args() -> None:
    trace = build_chrome_trace(fed())
    gpu = next(e for e in x_events(trace) if e["name"] == "gpu" and e["args"]["job"] == "porep-1000-1")
    assert gpu["ts"] == 1_777_618_806_000_000 and gpu["dur"] == 3_000_000  # engine start 07:00:01 + 5 s
    assert gpu["args"]["partition"] == 0 and gpu["args"]["worker"] == 0 and gpu["args"]["gpu_ms"] == 3000
    assert gpu["args"]["GPU_TIMING prove_start_ms"] == 2890
    assert gpu["args"]["FIN_TIMING total_ms"] == 15


def test_every_track_is_named() -> None:
    trace = build_chrome_trace(fed())
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    processes = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    for e in x_events(trace):
        assert e["pid"] in processes and (e["pid"], e["tid"]) in threads
    assert processes[1] == "GPU workers"
    # The log's worker start lines (engine.rs start()) put both workers on GPU 0.
    assert {threads[(1, 0)], threads[(1, 1)]} == {"GPU worker 0 on GPU0", "GPU worker 1 on GPU0"}
    assert "job porep-1000-3 (daemon run 2) — completed" in processes.values()


def test_overlapping_holds_of_one_worker_go_to_separate_threads() -> None:
    timeline = Timeline()
    timeline.apply(EngineStarted(100.0))
    for p, (start, end) in enumerate([(0, 3000), (2000, 5000), (5000, 6000)]):
        for event, offset in (("GPU_PICKUP", start), ("GPU_START", start), ("GPU_END", end)):
            detail = {"worker": "0", "partition": str(p)}
            timeline.apply(TimelineEvent(offset, event, "a", detail, p, 0))
    events = [e for e in x_events(build_chrome_trace(timeline)) if e["name"] == "gpu"]
    by_thread: dict[int, list[tuple[int, int]]] = {}
    for e in events:
        by_thread.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    assert len(events) == 3 and len(by_thread) == 2
    for spans in by_thread.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in pairwise(spans))


def test_an_engines_memory_counters_are_in_the_units_of_the_box_it_emulates() -> None:
    launched = DaemonLaunched(
        t=1.0, mode="engine", pid=9, command=(), config_path=None, listen="x", log_path=None,
        memory_limit_bytes=GiB, memory_scale=1 / 256,
    )  # fmt: skip
    sample = MemorySample(2.0, GiB // 2, cgroup_limit_bytes=GiB, budget_total_bytes=200 * GiB)
    trace = build_chrome_trace(Timeline(), [launched, sample])
    counters = {e["name"]: e["args"]["GiB"] for e in trace["traceEvents"] if e["ph"] == "C"}
    assert counters == {"daemon RSS": 128.0, "cgroup limit": 256.0, "budget total": 200.0}


def test_counters_from_samples_in_gib() -> None:
    samples: list[ObservedEvent] = [
        MemorySample(10.0, 2 * GiB, cgroup_usage_bytes=3 * GiB, cgroup_limit_bytes=8 * GiB, budget_total_bytes=None),
        GpuSample(11.0, 0, "H200", GiB // 2, 140 * GiB),
        Notice(12.0, "warning", "RSS near the limit"),
    ]
    trace = build_chrome_trace(Timeline(), samples)
    counters = {(e["name"], e["ts"]): e["args"]["GiB"] for e in trace["traceEvents"] if e["ph"] == "C"}
    assert counters == {
        ("daemon RSS", 10_000_000): 2.0,
        ("cgroup usage", 10_000_000): 3.0,
        ("cgroup limit", 10_000_000): 8.0,
        ("GPU 0 used", 11_000_000): 0.5,
        ("GPU 0 total", 11_000_000): 140.0,
    }
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert {"Memory", "GPU memory", "Daemon and benchmark"} <= names
    assert [e["name"] for e in trace["traceEvents"] if e["ph"] == "i"] == ["RSS near the limit"]


def test_write_is_atomic_and_replaces(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    out.write_text("old")
    count = write_chrome_trace(out, fed(), [])
    assert len(json.loads(out.read_text())["traceEvents"]) == count
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json"]
    with pytest.raises(OSError):
        write_chrome_trace(tmp_path / "missing" / "trace.json", fed(), [])


@pytest.mark.parametrize("batch", [1, 7, 100_000])
@pytest.mark.parametrize("observed", [False, True])
def test_the_written_file_is_the_traces_compact_json_batch_by_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int, observed: bool
) -> None:
    monkeypatch.setattr("cuzktui.export._WRITE_BATCH", batch)
    samples: list[ObservedEvent] = [
        MemorySample(10.0, 2 * GiB, cgroup_usage_bytes=3 * GiB, cgroup_limit_bytes=8 * GiB, budget_total_bytes=None),
        Notice(12.0, "warning", "RSS — near the limit"),
    ]
    events = samples if observed else []
    out = tmp_path / "trace.json"
    count = write_chrome_trace(out, fed(), events)
    trace = build_chrome_trace(fed(), events)
    assert out.read_bytes() == json.dumps(trace, separators=(",", ":")).encode()
    assert count == len(trace["traceEvents"])


def test_an_empty_trace_is_written_whole(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    assert write_chrome_trace(out, Timeline(), []) == 1  # the GPU workers' process name
    assert out.read_text() == json.dumps(build_chrome_trace(Timeline()), separators=(",", ":"))


# ---------------------------------------------------------------------------- the command


def test_export_of_a_raw_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.json"
    assert main(["export", str(FIXTURE), "-o", str(out)]) == 0
    trace = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert str(out) in printed and f"{len(trace['traceEvents'])} trace events" in printed
    assert len(x_events(trace)) == 23


def test_export_of_a_session_skips_a_damaged_event_line_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = tmp_path / "session"
    session.mkdir()
    (session / "daemon.log").write_bytes(FIXTURE.read_bytes())
    good = [json.dumps(to_record(MemorySample(float(t), t * GiB))) for t in (1, 2, 3)]
    (session / "events.jsonl").write_text("\n".join([*good[:2], '{"type": "MemorySample", "t":', good[2]]) + "\n")
    out = tmp_path / "t.json"
    assert main(["export", str(session), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"{session / 'events.jsonl'}: 1 damaged line skipped (the first: line 3 (" in err
    trace = json.loads(out.read_text())
    assert [e["ts"] for e in trace["traceEvents"] if e["ph"] == "C"] == [1_000_000, 2_000_000, 3_000_000]
    assert len(x_events(trace)) == 23


@pytest.mark.parametrize("case", ["missing", "empty_dir", "unwritable"])
def test_export_errors_name_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    source, out = FIXTURE, tmp_path / "t.json"
    if case == "missing":
        source = tmp_path / "nope.log"
    elif case == "empty_dir":
        source = tmp_path / "empty"
        source.mkdir()
    else:
        out = tmp_path / "no-such-dir" / "t.json"
    assert main(["export", str(source), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert str(out if case == "unwritable" else source) in err
    assert not out.exists()


def test_export_of_an_unreadable_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A file that exists but fails to read for anyone, root included (reading it from offset 0 is EIO).
    log = Path("/proc/self/mem")
    assert main(["export", str(log), "-o", str(tmp_path / "t.json")]) == 1
    assert f"{log}: cannot read" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()
