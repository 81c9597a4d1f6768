"""timeline: the waterfall model fed with the hand-built restart log and with synthetic streams."""

from __future__ import annotations

import calendar
import pickle
from dataclasses import fields
from pathlib import Path
from typing import cast

import pytest

from cuzktui.events import (
    CuzkTiming,
    DaemonStarting,
    EngineStarted,
    LogEvent,
    ProofAssembled,
    ProofFailedLine,
    TimelineEvent,
)
from cuzktui.logparse import parse_line
from cuzktui.timeline import LaneEntry, Partition, PipelineNow, Timeline

FIXTURE = Path(__file__).parent / "data" / "timeline_restart.log"
RUN1 = calendar.timegm((2026, 5, 1, 7, 0, 1))  # "starting cuzk engine" of the first run
RUN2 = calendar.timegm((2026, 5, 1, 7, 1, 2))
approx = pytest.approx


def near(value: float) -> float:
    """``pytest.approx`` where a float is expected (it compares equal to floats close to ``value``)."""
    return cast(float, approx(value))


def tl_event(offset_ms: int, event: str, job: str, **detail: int) -> TimelineEvent:
    partition, worker = detail.get("partition"), detail.get("worker")
    return TimelineEvent(
        offset_ms, event, job, {k: str(v) for k, v in detail.items()}, partition, worker, partition is None
    )


@pytest.fixture(scope="module")
def fed() -> Timeline:
    timeline = Timeline()
    for line in FIXTURE.read_text().splitlines():
        timeline.apply(parse_line(line))
    return timeline


def test_segments_per_daemon_run_anchored_at_the_engine_start(fed: Timeline) -> None:
    first, second = fed.segments
    assert (first.origin, first.anchored, first.ended) == (RUN1, True, True)
    assert (second.origin, second.anchored, second.ended) == (RUN2, True, False)
    assert (first.completed, first.failed, first.incomplete) == (3, 1, 1)
    assert (second.completed, second.failed, second.incomplete) == (1, 0, 0)
    assert fed.time_span() == (RUN1, approx(RUN2 + 8.1))


def test_a_resubmitted_job_id_is_a_new_job_in_the_new_run(fed: Timeline) -> None:
    died, redone = fed.job(0, "porep-1000-3"), fed.job(1, "porep-1000-3")
    assert died is not None and redone is not None
    assert died.status == "incomplete"
    # Partition 0 was on the GPU and partition 1 still synthesizing when the daemon was killed.
    assert died.partitions[0].incomplete and died.partitions[0].gpu_end is None
    assert died.partitions[1].incomplete and died.partitions[1].synth_end is None
    assert redone.status == "completed"
    assert redone.synth_ms_total == 8500 and redone.gpu_ms_total == 6000


def test_phases_and_durations_of_a_partitioned_job(fed: Timeline) -> None:
    job = fed.job(0, "porep-1000-1")
    assert job is not None and job.status == "completed" and not job.monolithic
    p0, p1 = job.partitions[0], job.partitions[1]
    assert (p0.synth_start, p0.synth_end, p0.gpu_start, p0.gpu_end) == (RUN1 + 1, RUN1 + 5, RUN1 + 5, RUN1 + 8)
    assert (p0.synth_s, p0.queue_wait_s, p0.pre_prove_s, p0.gpu_s) == (4.0, 0.0, 0.0, 3.0)
    assert (p1.synth_s, p1.queue_wait_s, p1.gpu_s) == (5.0, approx(0.499), 3.0)
    assert (p0.worker, p1.worker) == (0, 1)
    assert job.synth_ms_total == 8700 and job.gpu_ms_total == 6000
    assert job.assembled is not None and job.assembled.total_ms == 8600
    assert job.finished_at == approx(RUN1 + 9.6)


def test_monolithic_job_is_one_partition_completed_by_the_span_job_id(fed: Timeline) -> None:
    job = fed.job(0, "winpost-1000-aa")
    assert job is not None and job.monolithic and job.kind == "winning-post"
    assert list(job.partitions) == [0]
    assert job.partitions[0].gpu_s == approx(0.5) and job.partitions[0].synth_ms == 350
    assert job.status == "completed"


def test_failure_line_fails_job_and_partition(fed: Timeline) -> None:
    job = fed.job(0, "porep-1000-4")
    assert job is not None and job.status == "failed"
    assert job.partitions[0].failed
    assert job.error == "synthesis of partition 0 failed: out of memory"


def test_worker_timings_attach_to_their_partition(fed: Timeline) -> None:
    job = fed.job(0, "porep-1000-1")
    assert job is not None
    p0 = job.partitions[0]
    # hot_path by the span's job id; spawn_blocking and the finalizer by worker + partition.
    assert p0.gpu_timing == {
        "status_ms": 0,
        "fail_check_ms": 0,
        "mark_busy_ms": 0,
        "total_overhead_ms": 0,
        "spawn_to_enter_ms": 1,
        "prove_start_ms": 2890,
    }
    assert p0.fin_timing["total_ms"] == 15
    # Only p0 was on a GPU when the first CUZK_TIMING came; the later one had two candidates.
    assert p0.cuzk_timing == {"pre_lock_cpu_ms": 3, "mutex_wait_ms": 0}
    assert fed.unattached_cuzk_timings == 1
    assert fed.unattached[0].values == {"gpu_tid": 0, "ntt_msm_h_ms": 900}


def test_lanes_per_worker(fed: Timeline) -> None:
    lanes = fed.lanes(RUN1, RUN1 + 20)
    assert lanes[0] == [
        LaneEntry(near(RUN1 + 3.4), near(RUN1 + 3.9), 0, "winpost-1000-aa", 0),
        LaneEntry(RUN1 + 5, RUN1 + 8, 0, "porep-1000-1", 0),
        LaneEntry(RUN1 + 8, RUN1 + 11, 0, "porep-1000-2", 0),
        LaneEntry(RUN1 + 16, None, 0, "porep-1000-3", 0),
    ]
    assert lanes[1] == [
        LaneEntry(RUN1 + 6.5, RUN1 + 9.5, 0, "porep-1000-1", 1),
        LaneEntry(RUN1 + 9.5, RUN1 + 12.5, 0, "porep-1000-2", 1),
    ]
    later = fed.lanes(RUN2, RUN2 + 60)
    assert [(e.segment, e.job_id) for e in later[0]] == [(1, "porep-1000-3")]


def test_open_end_of_partitions_and_jobs() -> None:
    timeline = Timeline()
    events: list[LogEvent] = [
        EngineStarted(1000.0),
        tl_event(0, "SYNTH_START", "a", partition=0),
        tl_event(0, "SYNTH_START", "a", partition=1),
        tl_event(1000, "GPU_PICKUP", "a", worker=0, partition=0),
        tl_event(1000, "GPU_START", "a", worker=0, partition=0),
        tl_event(3000, "GPU_END", "a", worker=0, partition=0, gpu_ms=2000),
    ]
    for event in events:
        timeline.apply(event)
    job = timeline.job(0, "a")
    assert job is not None
    p0, p1 = job.partitions[0], job.partitions[1]
    assert timeline.open_end(p0, 1010.0) == 1003.0  # its GPU_END
    assert timeline.open_end(p1, 1010.0) == 1010.0  # still running: now
    assert timeline.open_end(job, None) == 1003.0  # no now: the run's last event
    timeline.apply(EngineStarted(1020.0))  # the daemon restarted: the job ended with its run
    assert job.status == "incomplete"
    assert timeline.open_end(p1, 1030.0) == timeline.open_end(job, 1030.0) == 1003.0


def test_work_open_when_the_daemon_died_runs_until_the_death() -> None:
    timeline = Timeline()
    for event in (EngineStarted(1000.0), tl_event(500, "SYNTH_START", "a", partition=0)):
        timeline.apply(event)
    assert timeline.daemon_exited(1009.0)  # an OOM kill 8.5 s into the synthesis
    job = timeline.job(0, "a")
    assert job is not None and job.status == "incomplete" and job.partitions[0].incomplete
    assert timeline.open_end(job.partitions[0], 1050.0) == 1009.0
    assert not timeline.daemon_exited(1010.0), "a run ends once"
    timeline.apply(DaemonStarting(1011.0))
    assert len(timeline.segments) == 2 and timeline.incomplete == 1


def test_a_workers_busy_share_and_idle_gaps(fed: Timeline) -> None:
    assert [fed.worker_use(w, RUN1 + 3, RUN1 + 13).busy_share for w in fed.workers()] == [approx(0.65), approx(0.6)]
    gaps = [(RUN1 + 3, RUN1 + 6.5), (RUN1 + 12.5, RUN1 + 13)]
    assert fed.worker_use(1, RUN1 + 3, RUN1 + 13).idle_gaps == gaps
    assert fed.worker_use(0, RUN1 + 3, RUN1 + 13, min_gap_s=1.0).idle_gaps == [
        (approx(RUN1 + 3.9), RUN1 + 5),
        (RUN1 + 11, RUN1 + 13),
    ]
    # The open partition of the killed run counts as busy until the run's last event (17.0).
    assert [fed.worker_use(w, RUN1 + 16, RUN1 + 18).busy_share for w in fed.workers()] == [approx(0.5), 0.0]


def test_jobs_in_a_window_ordered_by_first_start(fed: Timeline) -> None:
    assert [j.job_id for j in fed.jobs()] == [
        "porep-1000-1",
        "porep-1000-2",
        "winpost-1000-aa",
        "porep-1000-3",
        "porep-1000-4",
        "porep-1000-3",
    ]
    assert [(j.segment, j.job_id) for j in fed.jobs(RUN1 + 12.7, RUN1 + 14)] == [
        (0, "porep-1000-3"),
        (0, "porep-1000-4"),
    ]


def test_stats_summary(fed: Timeline) -> None:
    stats = fed.stats(window_s=70.0, now=RUN2 + 10)
    assert (stats.segments, stats.jobs_seen, stats.running) == (2, 6, 0)
    assert (stats.completed, stats.failed, stats.incomplete) == (4, 1, 1)
    assert stats.pipeline == PipelineNow(0, 0, 0)
    assert stats.proofs_per_hour_window == approx(4 * 3600 / 70)
    assert stats.proofs_per_hour_segment == approx(3600 / 8.1)
    assert stats.mean_gpu_s == approx((0.5 + 3.0 * 6) / 7)
    assert set(stats.gpu_busy) == {0, 1}


def test_pipeline_now_counts_running_partitions() -> None:
    timeline = Timeline()
    events: list[LogEvent] = [
        EngineStarted(1000.0),
        tl_event(0, "SYNTH_START", "a", partition=0),
        tl_event(0, "SYNTH_START", "a", partition=1),
        tl_event(0, "SYNTH_START", "a", partition=2),
        tl_event(10, "SYNTH_END", "a", partition=1, synth_ms=9),
        tl_event(10, "GPU_QUEUE", "a", partition=1),
        tl_event(20, "SYNTH_END", "a", partition=2, synth_ms=9),
        tl_event(20, "GPU_QUEUE", "a", partition=2),
        tl_event(21, "GPU_PICKUP", "a", worker=0, partition=2),
    ]
    for event in events:
        timeline.apply(event)
    assert timeline.pipeline_now() == PipelineNow(synthesizing=1, waiting_gpu=1, on_gpu=1)


def test_version_moves_only_on_change() -> None:
    timeline = Timeline()
    assert timeline.apply(parse_line("Caused by:")) is False
    assert timeline.version == 0
    assert timeline.apply(tl_event(5, "SYNTH_START", "a", partition=0)) is True
    assert timeline.apply(tl_event(6, "CHAN_SEND", "a", partition=0)) is False
    assert timeline.apply(ProofAssembled(None, "a", 1, 1, 1, 1)) is True
    assert timeline.apply(ProofAssembled(None, "a", 1, 1, 1, 1)) is False  # already completed
    assert timeline.version == 2


def test_before_any_anchor_offsets_stay_relative() -> None:
    timeline = Timeline()
    timeline.apply(tl_event(1500, "SYNTH_START", "a", partition=0))
    timeline.apply(tl_event(2500, "SYNTH_END", "a", partition=0, synth_ms=1000))
    (segment,) = timeline.segments
    assert not segment.anchored
    assert timeline.time_span() == (1.5, 2.5)
    # A later engine start begins a new, anchored run after it.
    timeline.apply(DaemonStarting(5000.0))
    timeline.apply(EngineStarted(5001.0))
    timeline.apply(tl_event(0, "SYNTH_START", "a", partition=0))
    assert [s.anchored for s in timeline.segments] == [False, True]
    assert timeline.time_span() == (1.5, 5001.0)


def test_cuzk_timing_uses_the_worker_gpu_mapping() -> None:
    timeline = Timeline()
    for line in [
        "2026-05-01T07:00:00.000000Z  INFO cuzk_core::engine: starting cuzk engine pipeline_enabled=true",
        "2026-05-01T07:00:00.000000Z  INFO cuzk_core::engine: pipeline GPU worker started worker_id=0 gpu=0 sub_id=0",
        "2026-05-01T07:00:00.000000Z  INFO cuzk_core::engine: pipeline GPU worker started worker_id=1 gpu=1 sub_id=0",
    ]:
        timeline.apply(parse_line(line))
    for worker in (0, 1):
        timeline.apply(tl_event(10, "GPU_PICKUP", "a", worker=worker, partition=worker))
        timeline.apply(tl_event(10, "GPU_START", "a", worker=worker, partition=worker))
    timeline.apply(CuzkTiming({"x_ms": 1}, gpu=1))
    timeline.apply(CuzkTiming({"y_ms": 2}))  # no GPU named, two open: ambiguous
    job = timeline.job(0, "a")
    assert job is not None
    assert (job.partitions[0].cuzk_timing, job.partitions[1].cuzk_timing) == ({}, {"x_ms": 1})
    assert timeline.unattached_cuzk_timings == 1


def _proof(job: str, start_ms: int) -> list[LogEvent]:
    return [
        tl_event(start_ms, "SYNTH_START", job, partition=0),
        tl_event(start_ms + 1000, "SYNTH_END", job, partition=0, synth_ms=1000),
        tl_event(start_ms + 1000, "GPU_QUEUE", job, partition=0),
        tl_event(start_ms + 1500, "GPU_PICKUP", job, worker=0, partition=0),
        tl_event(start_ms + 1500, "GPU_START", job, worker=0, partition=0),
        tl_event(start_ms + 2000, "GPU_END", job, worker=0, partition=0, gpu_ms=500),
    ]


def test_memory_stays_bounded_and_totals_count_evicted_jobs() -> None:
    timeline = Timeline(max_jobs=5)
    timeline.apply(EngineStarted(100.0))
    for n in range(40):
        for event in _proof(f"p{n}", n * 2000):
            timeline.apply(event)
        if n % 4 == 3:
            timeline.apply(ProofFailedLine(None, "partition GPU proving failed", "boom", f"p{n}", 0))
        else:
            timeline.apply(ProofAssembled(None, f"p{n}", 192, 2000, 1000, 500))
    timeline.apply(tl_event(80_000, "SYNTH_START", "running", partition=0))
    kept = timeline.jobs()
    assert [j.job_id for j in kept] == ["p35", "p36", "p37", "p38", "p39", "running"]
    assert (timeline.completed, timeline.failed, timeline.jobs_seen) == (30, 10, 41)
    stats = timeline.stats()
    assert (stats.mean_synth_s, stats.mean_queue_wait_s, stats.mean_gpu_s) == (1.0, 0.5, 0.5)
    lanes = timeline.lanes()
    assert [e.job_id for e in lanes[0]] == ["p35", "p36", "p37", "p38", "p39"]
    assert timeline.busy_fraction(100.0, 180.0)[0] == approx(5 * 0.5 / 80)


def test_zero_cap_is_refused() -> None:
    with pytest.raises(ValueError, match="max_jobs"):
        Timeline(max_jobs=0)


def test_a_jobs_first_start_follows_its_partitions_starts() -> None:
    timeline = Timeline()
    timeline.apply(EngineStarted(1000.0))
    for event in (tl_event(4000, "SYNTH_START", "a", partition=1), tl_event(5000, "SYNTH_START", "b", partition=0)):
        timeline.apply(event)
    job = timeline.job(0, "a")
    assert job is not None and job.first_start == 1004.0
    timeline.apply(tl_event(6000, "SYNTH_START", "a", partition=2))  # a later one: still the first
    assert job.first_start == 1004.0
    timeline.apply(tl_event(3000, "SYNTH_START", "a", partition=0))  # an earlier one
    assert job.first_start == 1003.0
    assert [j.job_id for j in timeline.jobs()] == ["a", "b"]
    # The earliest repeated later: the next earliest is first now, and the order follows.
    timeline.apply(tl_event(9000, "SYNTH_START", "a", partition=0))
    timeline.apply(tl_event(8000, "SYNTH_START", "a", partition=1))
    assert job.first_start == 1006.0
    assert [j.job_id for j in timeline.jobs()] == ["b", "a"]


def test_a_pickled_timeline_keeps_every_partition_whole_and_tied_to_its_job(fed: Timeline) -> None:
    assert any(p.cuzk_timing for job in fed.jobs() for p in job.partitions.values())  # fields past defaults
    copy = pickle.loads(pickle.dumps(fed, protocol=pickle.HIGHEST_PROTOCOL))
    assert [j.key for j in copy.jobs()] == [j.key for j in fed.jobs()]
    for job, copied_job in zip(fed.jobs(), copy.jobs(), strict=True):
        for index, p in job.partitions.items():
            copied = copied_job.partitions[index]
            assert copied.job is copied_job
            assert [getattr(copied, f.name) for f in fields(Partition) if f.name != "job"] == [
                getattr(p, f.name) for f in fields(Partition) if f.name != "job"
            ]
    lanes = copy.lanes()
    assert lanes == fed.lanes()
    assert all(copy.job(e.segment, e.job_id) is not None for entries in lanes.values() for e in entries)
