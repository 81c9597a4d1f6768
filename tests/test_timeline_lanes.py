"""timeline: the per-worker index of holds, kept as holds open, close and are evicted, cuts a window exactly
as a walk of every retained hold from scratch does, through an engine-like stream with overlapping holds,
restarts that leave holds open, repeated GPU_END lines and evictions."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from cuzktui.events import EngineStarted, LogEvent, ProofAssembled, ProofFailedLine, TimelineEvent
from cuzktui.timeline import LaneEntry, Timeline

WORKERS = 3


def _timeline_event(offset_ms: int, event: str, job: str, partition: int, worker: int | None = None) -> TimelineEvent:
    detail = {"partition": str(partition)} | ({} if worker is None else {"worker": str(worker)})
    return TimelineEvent(offset_ms, event, job, detail, partition, worker, False)


def _engine_like(seed: int, runs: int = 4, jobs_per_run: int = 30) -> Iterator[LogEvent]:
    """Daemon runs of jobs of 1-4 partitions proved on random workers, holds overlapping at random; each
    run is cut short by the next one's engine start, leaving what was in flight open."""
    rng = random.Random(seed)
    clock_ms = 1_000_000
    for run in range(runs):
        origin_ms = clock_ms
        taken: set[tuple[int, int]] = set()  # (worker, ms): no two holds of a lane start together
        timed: list[tuple[int, LogEvent]] = []  # sorted by time once the run is made (a stable sort)
        at = timed.append
        for n in range(jobs_per_run):
            job = f"r{run}-j{n}"
            begin = origin_ms + n * rng.randint(200, 900)
            finish = begin
            for partition in range(rng.randint(1, 4)):
                synth_start = begin + rng.randint(0, 300)
                synth_end = synth_start + rng.randint(100, 2000)
                worker = rng.randrange(WORKERS)
                pickup = synth_end + rng.randint(0, 1500)
                gpu_end = pickup + rng.randint(0, 2500)
                picked_up = rng.random() < 0.9  # else the GPU_END is the first line naming the worker
                while (worker, pickup if picked_up else gpu_end) in taken:  # where the hold starts
                    pickup, gpu_end = pickup + 1, gpu_end + 1
                taken.add((worker, pickup if picked_up else gpu_end))
                at((synth_start, _timeline_event(synth_start - origin_ms, "SYNTH_START", job, partition)))
                at((synth_end, _timeline_event(synth_end - origin_ms, "SYNTH_END", job, partition)))
                if picked_up:
                    at((pickup, _timeline_event(pickup - origin_ms, "GPU_PICKUP", job, partition, worker)))
                    at((pickup, _timeline_event(pickup - origin_ms, "GPU_START", job, partition, worker)))
                at((gpu_end, _timeline_event(gpu_end - origin_ms, "GPU_END", job, partition, worker)))
                if rng.random() < 0.05:  # a repeated GPU_END, later
                    again = gpu_end + rng.randint(1, 3000)
                    at((again, _timeline_event(again - origin_ms, "GPU_END", job, partition, worker)))
                finish = max(finish, gpu_end)
            done = finish + 10
            if rng.random() < 0.15:
                at((done, ProofFailedLine(done / 1000, "partition GPU proving failed", "boom", job, 0)))
            else:
                at((done, ProofAssembled(done / 1000, job, 192, done - begin, None, None)))
        cut = origin_ms + int(jobs_per_run * 500 * rng.uniform(0.7, 1.3))
        yield EngineStarted(origin_ms / 1000)
        yield from (event for ms, event in sorted(timed, key=lambda item: item[0]) if ms <= cut)
        clock_ms = cut + 5000


def _from_scratch(
    timeline: Timeline, worker: int, start: float, end: float, now: float | None
) -> list[tuple[float, float, LaneEntry]]:
    """The holds from the first (in start order) that reaches ``start`` to the last that starts by ``end``,
    from every retained partition the worker holds."""
    every = sorted(
        (
            (
                p.lane_start,
                p.gpu_end if p.gpu_end is not None else timeline.open_end(p, now),
                LaneEntry(p.lane_start, p.gpu_end, job.segment, job.job_id, p.index),
            )
            for job in timeline.jobs()
            for p in job.partitions.values()
            if p.worker == worker and p.lane_start is not None
        ),
        key=lambda hold: hold[0],
    )
    first = next((i for i, hold in enumerate(every) if hold[1] >= start), len(every))
    return [hold for hold in every[first:] if hold[0] <= end]


@pytest.mark.parametrize("seed", range(6))
def test_the_lane_index_cuts_a_window_as_a_walk_of_every_hold_does(seed: int) -> None:
    rng = random.Random(seed)
    timeline = Timeline(max_jobs=8)  # evictions, and compactions of their holds, all along
    windows_checked = 0
    left_open = 0  # checks that saw a hold its daemon run left open
    for n, event in enumerate(_engine_like(seed)):
        timeline.apply(event)
        span = timeline.time_span()
        if n % 7 or span is None:
            continue
        low, high = span
        left_open += any(
            p.incomplete and p.lane_start is not None for job in timeline.jobs() for p in job.partitions.values()
        )
        for _ in range(4):
            a = rng.uniform(low - 5, high + 5)
            b = a + rng.choice([0.0, rng.uniform(0, 3), rng.uniform(0, high - low + 10)])
            for now in (None, high, high + rng.uniform(0, 20)):
                for worker in range(WORKERS + 1):
                    assert timeline.lane_holds(worker, a, b, now) == _from_scratch(timeline, worker, a, b, now)
                windows_checked += 1
            assert {w: entries for w, entries in timeline.lanes(a, b).items() if entries} == {
                w: [e for _, stop, e in _from_scratch(timeline, w, a, b, b) if stop >= a]
                for w in range(WORKERS)
                if any(stop >= a for _, stop, _ in _from_scratch(timeline, w, a, b, b))
            }
    assert windows_checked > 100
    assert timeline.jobs_seen > len(timeline.jobs())  # some were evicted
    assert left_open > 0
