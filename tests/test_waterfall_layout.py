"""The waterfall's arithmetic without a terminal: the window clamped to the session, a cell for every
phase however short, separators that say why each daemon run began, the rows counted whole but built
a window at a time, and the lanes' holds read once and cut to a window."""

from __future__ import annotations

from itertools import pairwise

from cuzktui import events as ev
from cuzktui.figures import timeline_now
from cuzktui.logparse import parse_line
from cuzktui.model import SessionModel
from cuzktui.timeline import LaneEntry
from cuzktui.waterfall_layout import (
    RunBoundary,
    WaterfallRows,
    clamp_window,
    column_owners,
    run_boundary,
)

T0 = 1_700_000_000.0


def test_a_window_stays_within_the_session_and_keeps_its_length() -> None:
    origin, latest = T0, T0 + 600
    assert clamp_window(T0 - 90, T0 + 210, origin, latest) == (T0, T0 + 300)  # panned before the start
    assert clamp_window(T0 + 500, T0 + 800, origin, latest) == (T0 + 300, T0 + 600)  # past the live edge
    assert clamp_window(T0 + 100, T0 + 400, origin, latest) == (T0 + 100, T0 + 400)  # inside: unchanged
    # Longer than the session (a zoomed-out live window early on): it starts at the first event.
    assert clamp_window(T0 - 500, T0 + 100, origin, T0 + 100) == (T0, T0 + 600)


def test_every_phase_of_a_partition_keeps_a_cell_on_a_long_session() -> None:
    # 8 hours over 60 columns: 480 s a cell. A 40 s synthesis, a 2 s GPU-queue wait and a 9 s prove
    # fall in one cell, which shows only the synthesis.
    spc, columns = 480.0, 60
    s = T0 + 3 * 3600 + 100
    phases = [(s, s + 40, "synth"), (s + 40, s + 42, "queue"), (s + 42, s + 51, "gpu")]
    plain = column_owners(phases, T0, spc, columns, keep_every=False)
    assert sorted({o for o in plain if o is not None}) == [0]
    owners = column_owners(phases, T0, spc, columns)
    shown = [o for o in owners if o is not None]
    assert shown == [0, 1, 2]  # each once, in time order
    first = owners.index(0)
    assert owners[first : first + 3] == [0, 1, 2]  # side by side, where the partition ran


def test_a_short_phase_takes_a_cell_from_a_long_neighbour_not_a_lone_one() -> None:
    # 10 s a cell: a 95 s synthesis, a 1 s wait, a 30 s prove; the wait lies inside the synthesis' last cell.
    s = T0 + 5
    phases = [(s, s + 95, "synth"), (s + 95, s + 96, "queue"), (s + 96, s + 126, "gpu")]
    owners = column_owners(phases, T0, 10.0, 20)
    counts = {i: owners.count(i) for i in range(3)}
    assert counts[1] == 1 and counts[0] >= 9 and counts[2] >= 2
    assert owners.index(0) < owners.index(1) < owners.index(2)
    # A phase of no length (a 0 ms pickup) takes nothing from the others; one outside the window nothing at all.
    instant = [(s, s + 95, "synth"), (s + 95, s + 95, "queue"), (s + 95, s + 126, "gpu")]
    assert 1 not in column_owners(instant, T0, 10.0, 20)
    later = [*phases, (T0 + 900, T0 + 901, "gpu")]
    assert 3 not in column_owners(later, T0, 10.0, 20)


def _run(model: SessionModel, t: float, pid: int, changes: tuple[str, ...] = ()) -> None:
    """A daemon launched at ``t`` that writes its start to the log (a new timeline segment)."""
    command = ("cuzk-engine", "-c", "cuzk.toml")
    model.apply(ev.DaemonLaunched(t, "engine", pid, command, "cuzk.toml", "127.0.0.1:9820", "daemon.log"))
    model.apply(ev.DaemonStarting(t + 0.5))
    model.apply(ev.EngineStarted(t + 1, True))
    model.apply(ev.ConfigApplied(t + 2, pid, f"config/v{pid:03d}.toml", changes))


def _exit(model: SessionModel, t: float, pid: int, cause: ev.ExitCause) -> None:
    model.apply(ev.DaemonExited(t, pid, 0 if cause == "stopped" else -9, None, cause, ("evidence",)))


def test_separators_say_why_each_run_began_and_only_failures_are_failures() -> None:
    model = SessionModel()
    _run(model, T0, 1)
    _exit(model, T0 + 100, 1, "oom_kill")  # run 1 OOM-killed
    _run(model, T0 + 101, 2)
    _exit(model, T0 + 200, 2, "stopped")  # the Bench screen hands the daemon to its runner
    _run(model, T0 + 201, 3)
    model.apply(ev.BenchStarted(T0 + 215, "b1", "porep", 4, 2, 1))
    model.apply(ev.BenchFinished(T0 + 290, "b1", 4, 0, 75.0, 192.0, "completed"))
    _exit(model, T0 + 291, 3, "stopped")  # ... and the runner gives it back
    _run(model, T0 + 292, 4)
    _exit(model, T0 + 300, 4, "stopped")  # knobs applied
    _run(model, T0 + 301, 5, changes=("pipeline.max_parallel_synthesis: 12 -> 8",))
    _exit(model, T0 + 400, 5, "signal")  # killed by someone: a crash
    _run(model, T0 + 401, 6)
    _exit(model, T0 + 500, 6, "stopped")  # stopped and started again, nothing changed
    _run(model, T0 + 501, 7)
    assert len(model.timeline.segments) == 7
    assert [run_boundary(model, segment) for segment in range(1, 7)] == [
        RunBoundary("OOM kill", True),
        RunBoundary("benchmark hand-over", False),
        RunBoundary("benchmark hand-over", False),
        RunBoundary("restart: knobs applied", False),
        RunBoundary("crash", True),
        RunBoundary("restart", False),
    ]


def test_a_bare_logs_restart_says_the_log_does_not_tell_why() -> None:
    model = SessionModel(log_source="daemon.log")
    for t in (T0, T0 + 100):
        model.apply(ev.DaemonStarting(t))
        model.apply(ev.EngineStarted(t + 1, True))
    assert run_boundary(model, 1) == RunBoundary("restart (the log does not say why)", False)


def _two_runs() -> SessionModel:
    """A bare log of two daemon runs: jobs 1-3 (2, 1 and 3 partitions) in the first, 4-5 (2 each) in
    the second; partition p is picked up by worker p % 2, and job 5's last partition is still proving."""
    model = SessionModel(log_source="daemon.log")
    runs = (
        (T0, (("porep-1000-1", 2), ("porep-1000-2", 1), ("porep-1000-3", 3))),
        (T0 + 600, (("porep-1000-4", 2), ("porep-1000-5", 2))),
    )
    for t, jobs in runs:
        model.apply(ev.DaemonStarting(t))
        model.apply(ev.EngineStarted(t + 1, True))
        for j, (job, partitions) in enumerate(jobs):
            for p in range(partitions):
                ms = 10_000 * j + 1_000 * p
                model.apply(parse_line(f"TIMELINE,{ms},SYNTH_START,{job},partition={p}"))
                model.apply(parse_line(f"TIMELINE,{ms + 4000},SYNTH_END,{job},partition={p},synth_ms=4000"))
                model.apply(parse_line(f"TIMELINE,{ms + 4000},GPU_QUEUE,{job},partition={p}"))
                model.apply(parse_line(f"TIMELINE,{ms + 4100},GPU_PICKUP,{job},worker={p % 2},partition={p}"))
                model.apply(parse_line(f"TIMELINE,{ms + 4100},GPU_START,{job},worker={p % 2},partition={p}"))
                if (job, p) != ("porep-1000-5", 1):
                    end = f"TIMELINE,{ms + 6100},GPU_END,{job},worker={p % 2},partition={p},gpu_ms=2000"
                    model.apply(parse_line(end))
    return model


def test_the_rows_are_counted_whole_and_any_window_of_them_is_that_slice_of_the_whole() -> None:
    model = _two_runs()
    rows = WaterfallRows(model, lanes=False, ascii_only=False)
    whole = list(rows)
    assert [(row.kind, row.label) for row in whole] == [
        ("job", "porep-1000-1"),
        ("partition", "  p0 w0"),
        ("partition", "  p1 w1"),
        ("job", "porep-1000-2"),
        ("partition", "  p0 w0"),
        ("job", "porep-1000-3"),
        ("partition", "  p0 w0"),
        ("partition", "  p1 w1"),
        ("partition", "  p2 w0"),
        ("segment", "daemon run 2 · restart (the log does not say why)"),
        ("job", "porep-1000-4"),
        ("partition", "  p0 w0"),
        ("partition", "  p1 w1"),
        ("job", "porep-1000-5"),
        ("partition", "  p0 w0"),
        ("partition", "  p1 w1"),
    ]
    partition = whole[8].partition
    assert partition is not None and partition.job.job_id == "porep-1000-3" and partition.index == 2
    assert whole[9].segment is model.timeline.segments[1] and whole[10].segment is model.timeline.segments[1]
    for first in range(len(whole) + 1):
        for stop in range(first, len(whole) + 2):
            assert rows[first:stop] == whole[first:stop]
    assert rows[-1] == whole[-1] and rows[-len(whole)] == whole[0]
    lanes = WaterfallRows(model, lanes=True, ascii_only=False)
    assert [(row.kind, row.label, row.worker) for row in lanes] == [("lane", "worker 0", 0), ("lane", "worker 1", 1)]


def test_selection_steps_over_partitions_and_lanes_and_stops_at_either_end() -> None:
    model = _two_runs()
    for lanes in (False, True):
        rows = WaterfallRows(model, lanes=lanes, ascii_only=True)
        selectable = [i for i, row in enumerate(rows) if row.kind in ("partition", "lane")]
        assert rows.step(None, 1) == selectable[0] and rows.step(None, -1) == selectable[-1]
        for here, following in pairwise(selectable):
            assert rows.step(here, 1) == following and rows.step(following, -1) == here
        assert rows.step(selectable[-1], 1) == selectable[-1] and rows.step(selectable[0], -1) == selectable[0]
    # From a row that cannot be selected (a job's, a separator's: the rows moved under the selection).
    rows = WaterfallRows(model, lanes=False, ascii_only=False)
    assert rows.step(9, 1) == 11 and rows.step(9, -1) == 8 and rows.step(10, -1) == 8
    assert WaterfallRows(SessionModel(), lanes=False, ascii_only=False).step(None, 1) is None


def test_a_lanes_holds_in_a_window_are_every_hold_that_reaches_into_it_in_start_order() -> None:
    model = _two_runs()
    now = timeline_now(model)

    def holds(worker: int, start: float, end: float) -> list[tuple[float, float, LaneEntry]]:
        return model.timeline.lane_holds(worker, start, end, now)

    span = model.timeline.time_span()
    assert span is not None
    every = holds(0, *span)
    assert [(e.job_id, e.partition) for _, _, e in every] == [
        ("porep-1000-1", 0),
        ("porep-1000-2", 0),
        ("porep-1000-3", 0),
        ("porep-1000-3", 2),
        ("porep-1000-4", 0),
        ("porep-1000-5", 0),
    ]
    assert all(stop > start for start, stop, _ in every)
    still_open = holds(1, *span)[-1]
    assert still_open[2].end is None and still_open[1] == timeline_now(model)  # an open hold runs to now
    for a in range(int(span[0]), int(span[1]) + 2, 3):
        for b in range(a, int(span[1]) + 2, 7):
            shown = holds(0, a, b)
            assert [h for h in every if h[0] <= b and h[1] >= a] == [h for h in shown if h[1] >= a]
            assert all(h[0] <= b for h in shown)
    assert holds(7, *span) == []
    model.apply(parse_line("TIMELINE,30000,GPU_END,porep-1000-5,worker=1,partition=1,gpu_ms=2000"))
    closed = holds(1, *span)[-1]  # the index follows the timeline: the open hold has closed
    assert closed[2].end is not None and closed[1] == closed[2].end
