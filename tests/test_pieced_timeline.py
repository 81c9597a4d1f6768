"""TIMELINE lines a tracing line was written into (issue 24.3).

engine.rs ``timeline_event`` writes TIMELINE with ``eprintln!``: one write to stderr per piece of its format
(``TIMELINE,``, the offset, ``,``, the event, ``,``, the job id, ``,``, the detail, the newline), while tracing
writes each line whole to stdout. With both streams on one file (as the tool launches the daemon) a tracing
line can land between two pieces. Seen on the H200: ``TIMELINE,157180,GPU_PICKUP,<job>,`` + a whole tracing
line on one line, then ``worker=1`` alone on the next. Every reader (the live follower, the post-mortem
readers that skip inert lines, the lazy one) reads both the tracing line and the TIMELINE event.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.ingest import synthetic_log
from cuzktui import events as ev
from cuzktui.logparse import parse_line, split_pieced_timeline, strip_ansi, timing_events
from cuzktui.session import LogFollower, load_session

JOB = "winpost-1000-3c14a2815c256973"
TRACING = (
    "2026-12-04T14:31:35.707734Z  INFO synth_single{proof_kind=winning-post}: cuzk_core::engine: "
    "synthesis complete, sending to GPU synth_ms=812 circuit_id=winning-32g batch_size=1 sectors=1"
)
COLOURED = (
    "\x1b[2m2026-12-04T14:31:35.707734Z\x1b[0m \x1b[32m INFO\x1b[0m \x1b[1msynth_single\x1b[0m"
    "\x1b[1m{\x1b[0m\x1b[3mproof_kind\x1b[0m\x1b[2m=\x1b[0mwinning-post\x1b[1m}\x1b[0m\x1b[2m:\x1b[0m "
    "\x1b[2mcuzk_core::engine\x1b[0m\x1b[2m:\x1b[0m synthesis complete, sending to GPU"
)
STARTUP = "2026-12-04T14:29:00.000000Z  INFO cuzk_core::engine: starting cuzk engine pipeline_enabled=true"
READERS = {
    "live": {},
    "post-mortem": {"skip_inert": True},
    "post-mortem without details": {"skip_inert": True, "details": False},
    "lazy": {"skip_inert": True, "lazy": True},
}


def _events(path: Path, reader: str, poll_bytes: int | None = None) -> list[object]:
    """What a reader makes of ``path``: read whole, or (``poll_bytes``) as a live poll does, a slice at a time;
    a lazy reader's unparsed timing runs are given as the timing events they hold."""
    follower = LogFollower(path, **READERS[reader])
    keyed: list[tuple[float, object]] = []
    size = path.stat().st_size
    while poll_bytes is not None and follower.offset < size:
        keyed += follower.read(final=False, limit=poll_bytes)
    keyed += follower.read(final=True)
    out: list[object] = []
    for _, event in keyed:
        if isinstance(event, ev.DetailLines):
            out += timing_events(event.text)
        elif not isinstance(event, ev.PlainLine) or reader == "live":
            out.append(event)
    return out


def _pieces(line: str) -> list[str]:
    """A TIMELINE line as eprintln! writes it, one piece a write (the format's literals and arguments)."""
    _, offset, event, job, detail = line.split(",", 4)
    return ["TIMELINE,", offset, ",", event, ",", job, ",", detail]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_bytes(("\n".join(lines) + "\n").encode())
    return path


@pytest.mark.parametrize("reader", READERS)
def test_the_issues_pair_gives_the_tracing_line_and_the_timeline_event(tmp_path: Path, reader: str) -> None:
    timeline_line = f"TIMELINE,157180,GPU_PICKUP,{JOB},worker=1"
    pieced = _write(tmp_path / "pieced.log", [STARTUP, f"TIMELINE,157180,GPU_PICKUP,{JOB},{TRACING}", "worker=1"])
    events = _events(pieced, reader)
    pickup = parse_line(timeline_line)
    assert isinstance(pickup, ev.TimelineEvent) and pickup.worker == 1 and pickup.monolithic
    tracing = parse_line(TRACING)
    assert isinstance(tracing, ev.LogRecord)
    if reader.startswith("post-mortem") or reader == "lazy":
        assert events[-1] == pickup  # the tracing line is inert there: only the event is kept
    else:
        assert events[-2:] == [tracing, pickup]
    # The model sees the worker take the job.
    _, model = load_session(pieced)
    job = next(j for j in model.timeline.jobs() if j.job_id == JOB)
    assert job.partitions[0].gpu_pickup is not None and job.partitions[0].worker == 1


def test_a_coloured_tracing_line_is_cut_out_whole() -> None:
    pieces = split_pieced_timeline(f"TIMELINE,157180,GPU_PICKUP,{JOB},{COLOURED}".encode())
    assert pieces == (f"TIMELINE,157180,GPU_PICKUP,{JOB},".encode(), COLOURED.encode())
    # A whole TIMELINE line is none, whatever its job id holds.
    assert split_pieced_timeline(b"TIMELINE,5,GPU_END,a.b-2026-12-04,worker=0,gpu_ms=7") is None


def _swap_in(lines: list[str], index: int, cut: int, between: int) -> tuple[list[str], list[str]]:
    """(the log with TIMELINE line ``index`` pieced at piece boundary ``cut`` by the tracing line after it,
    its rest coming ``between`` whole lines later; the log as it reads: the tracing line, those lines, then
    the TIMELINE line)."""
    timeline_line, tracing = lines[index], lines[index + 1]
    others = lines[index + 2 : index + 2 + between]
    pieces = _pieces(timeline_line)
    head, rest = "".join(pieces[:cut]), "".join(pieces[cut:])
    after = lines[index + 2 + between :]
    pieced = [*lines[:index], head + tracing, *others, rest, *after]
    expected = [*lines[:index], tracing, *others, timeline_line, *after]
    return pieced, expected


def _pairs(lines: list[str]) -> list[int]:
    """TIMELINE lines followed by a tracing line: where a piecing is imitated."""
    starts = [strip_ansi(line)[:1] for line in lines]
    return [i for i in range(len(lines) - 1) if lines[i].startswith("TIMELINE,") and starts[i + 1] == "2"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_reader_reads_a_pieced_log_as_the_log_the_daemon_meant(tmp_path: Path, data: st.DataObject) -> None:
    lines = list(synthetic_log(2))
    pairs = _pairs(lines)
    pieced, expected = lines, lines
    # One to three piecings, at any boundary between two pieces (the last: before the newline, an empty rest),
    # with up to two whole lines (a CUZK_TIMING, another tracing line) before the rest. stderr's lock keeps
    # TIMELINE lines apart, so piecings are not drawn within each other's reach.
    chosen: list[int] = []
    for index in sorted(data.draw(st.sets(st.sampled_from(pairs), min_size=1, max_size=3))):
        if not chosen or index - chosen[-1] > 4:
            chosen.append(index)
    for index in reversed(chosen):
        cut = data.draw(st.integers(1, len(_pieces(lines[index]))))
        between = data.draw(st.integers(0, 2))
        pieced, _ = _swap_in(pieced, index, cut, between)
        _, expected = _swap_in(expected, index, cut, between)
    reader = data.draw(st.sampled_from(list(READERS)))
    poll = data.draw(st.sampled_from([None, 97, 4096]))
    got = _events(_write(tmp_path / "pieced.log", pieced), reader, poll)
    assert got == _events(_write(tmp_path / "expected.log", expected), reader)


def test_pieces_whose_rest_never_comes_are_read_as_they_stand(tmp_path: Path) -> None:
    # The daemon died between two writes: the pieces end the log.
    log = _write(tmp_path / "cut.log", [STARTUP, f"TIMELINE,157180,GPU_PICKUP,{JOB},{TRACING}"])
    events = _events(log, "live")
    assert events[-2] == parse_line(TRACING)
    last = events[-1]
    assert isinstance(last, ev.TimelineEvent) and last.event == "GPU_PICKUP" and last.job_id == JOB


def test_a_line_that_is_no_rest_leaves_the_pieces_alone(tmp_path: Path) -> None:
    # A panic's text after the pieces is no TIMELINE detail: both are read as they are.
    panic = "thread 'tokio-runtime-worker' panicked at cuzk-core/src/engine.rs:3020:9:"
    log = _write(tmp_path / "panic.log", [STARTUP, f"TIMELINE,157180,GPU_PICKUP,{JOB},{TRACING}", panic])
    events = _events(log, "live")
    assert events[-1] == ev.PlainLine(panic)
    assert isinstance(events[-2], ev.TimelineEvent) and events[-2].detail == {}
