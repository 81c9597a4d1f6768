"""The waterfall model: job -> partitions -> phases, per-worker GPU lanes, and the figures on top.

Fed with parsed log events in log order (:meth:`Timeline.apply`). Per partition the phases are
synthesis (SYNTH_START -> SYNTH_END), GPU queue wait (GPU_QUEUE -> GPU_PICKUP), pre-prove
overhead (GPU_PICKUP -> GPU_START) and GPU (GPU_START -> GPU_END); a monolithic job (PoSt,
batched PoRep) is one partition, index 0.

Time axis: one axis in seconds for the whole session. A TIMELINE offset is anchored to wall
time by the ``starting cuzk engine`` line of its daemon run (``wall = engine_ts + offset/1000``).
Every daemon run is a :class:`Segment` (``cuzk-daemon starting`` or a second engine start opens
one); a segment with no engine start keeps its offsets relative to the daemon start time
when known, else placed after everything seen so far, and says ``anchored=False``. Jobs are
keyed by (segment, job id): a benchmark that resubmits the same ids after a crash gets new jobs.
When a segment ends, its still-running jobs become ``incomplete`` and their open phases stay
open (``incomplete`` on the partition). A monolithic job replaced in the GPU queue (engine.rs
``PriorityWorkQueue`` keys every monolithic job (0, 0)) is ``lost``: its caller is never answered.

Lanes: per GPU worker id, the partitions it held, from pickup to GPU_END (the worker is busy
from pickup; pickup -> start is normally 0). A worker may hold two partitions at once (the
finalizer of one overlaps the prove of the next), so busy time is the union of intervals. Each lane is
indexed as its holds open and close (:meth:`Timeline.lane_holds` finds a window's by bisection).

Memory bound: at most ``max_jobs`` finished (completed / failed / incomplete / lost) jobs are
retained; the oldest finished ones are evicted with their lane entries, while the counters
(completed, failed, incomplete, lost, jobs seen) and the running sums behind the mean durations keep
counting them. Running jobs are never evicted. Segments (one per daemon run) and the last
``max_jobs`` completion times are kept; unattributed CUZK_TIMING lines keep only the last 256.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from itertools import accumulate
from typing import Any, Final, Literal, NamedTuple

from . import daemon_messages as M
from .events import (
    BatchMemberDelivered,
    BatchSplit,
    CuzkTiming,
    DaemonStarting,
    DetailLines,
    EngineShutdown,
    EngineStarted,
    FinTiming,
    GpuTiming,
    JobQueued,
    LogEvent,
    LogRecord,
    MonolithicProcessing,
    NttTiming,
    ProofAssembled,
    ProofFailedLine,
    SelfCheck,
    Span,
    TimelineEvent,
)
from .logparse import timing_events

__all__ = [
    "DEFAULT_MAX_JOBS",
    "LOST_REMEDY",
    "Job",
    "JobStatus",
    "LaneEntry",
    "Partition",
    "PipelineNow",
    "Segment",
    "Timeline",
    "TimelineStats",
    "lost_reason",
]

DEFAULT_MAX_JOBS: Final = 2000
_UNATTACHED_KEPT: Final = 256
# How far back in a worker's lane a GPU_TIMING/FIN_TIMING line may refer (the finalizer of a
# partition reports after the worker picked up the next one or two).
_LANE_LOOKBACK: Final = 8
# The last dequeued jobs kept to attribute a job-less failure of the dispatcher to (a batch is at most
# max_batch_size requests, a handful in practice).
_DEQUEUED_KEPT: Final = 64

JobStatus = Literal["running", "completed", "failed", "incomplete", "lost"]


# What to do about jobs lost in upstream's monolithic GPU queue until it keys them apart (engine.rs
# PriorityWorkQueue::push): one monolithic job in flight, or none through that queue at all.
LOST_REMEDY: Final = "run PoSt at concurrency 1, or set pipeline.enabled = false, until upstream fixes it"


def lost_reason(job: Job) -> str:
    """Why a ``lost`` job never gets its answer, in the words every view uses."""
    return (
        f"replaced in the monolithic GPU queue by {job.overtaken_by}: upstream's PriorityWorkQueue keys every "
        "monolithic job (0, 0), so this one's Prove never returns"
    )


def run_number(segment: int) -> int:
    """The daemon run a segment index is, counted as people count (the first run is 1): the waterfall,
    the dashboard's "run N" and the export all number runs with this."""
    return segment + 1


def _span(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start


@dataclass(slots=True, eq=False)
class Partition:
    """One partition of a job: phase boundaries on the session axis (seconds) and its timings."""

    job: Job
    index: int
    synth_start: float | None = None
    synth_end: float | None = None
    gpu_queue: float | None = None
    gpu_pickup: float | None = None
    gpu_start: float | None = None
    gpu_end: float | None = None
    worker: int | None = None
    synth_ms: int | None = None  # as reported by SYNTH_END (excludes circuit construction)
    gpu_ms: int | None = None  # as reported by GPU_END (prove call -> finalize)
    failed: bool = False
    incomplete: bool = False  # its daemon run ended with a phase of it still open
    gpu_timing: dict[str, int] = field(default_factory=dict)
    fin_timing: dict[str, int] = field(default_factory=dict)
    is_pinned: bool | None = None  # "partition synthesis complete ... is_pinned=" (pipeline.rs)
    lane_start: float | None = None  # set when it joins a worker's lane
    _cuzk: dict[str, int] = field(default_factory=dict)
    _ntt: dict[str, int] = field(default_factory=dict)
    # Its C++ timing lines a post-mortem read kept unparsed (DetailLines): (start, length) ranges of the
    # log and how to read them, parsed in order on the first look at cuzk_timing or ntt_timing.
    _unread: list[tuple[int, int]] | None = None
    _reread: Callable[[int, int], bytes] | None = None

    @property
    def cuzk_timing(self) -> dict[str, int]:
        """CUZK_TIMING figures (supraseal's groth16_cuda.cu), later lines winning."""
        self._read_details()
        return self._cuzk

    @property
    def ntt_timing(self) -> dict[str, int]:
        """CUZK_NTT_H figures (groth16_ntt_h.cu), later lines winning."""
        self._read_details()
        return self._ntt

    def __reduce__(self) -> tuple[type[Partition], tuple[object, ...]]:
        """Pickled as its constructor's arguments: a model checkpoint holds tens of thousands of partitions,
        and these unpickle in a third less time than the default (a dict of every slot, set one by one)."""
        return (Partition, _partition_fields(self))

    def keep_unread(self, lines: DetailLines) -> None:
        """Remember where ``lines`` are in the log, to parse them when the details are looked at."""
        if self._unread is None:
            self._unread = []
        self._unread.append((lines.start, len(lines.text)))
        self._reread = lines.reread

    def _read_details(self) -> None:
        if not self._unread or self._reread is None:
            return
        unread, self._unread = self._unread, None
        for start, length in unread:
            for event in timing_events(self._reread(start, length)):
                (self._cuzk if isinstance(event, CuzkTiming) else self._ntt).update(event.values)

    @property
    def synth_s(self) -> float | None:
        return _span(self.synth_start, self.synth_end)

    @property
    def queue_wait_s(self) -> float | None:
        return _span(self.gpu_queue, self.gpu_pickup)

    @property
    def pre_prove_s(self) -> float | None:
        return _span(self.gpu_pickup, self.gpu_start)

    @property
    def gpu_s(self) -> float | None:
        return _span(self.gpu_start, self.gpu_end)


_partition_fields: Final = operator.attrgetter(*(f.name for f in fields(Partition)))


@dataclass(slots=True, eq=False)
class Job:
    """One proof request within one daemon run."""

    segment: int
    job_id: str
    monolithic: bool = False
    kind: str | None = None  # only TIMELINE of monolithic jobs names it
    status: JobStatus = "running"
    partitions: dict[int, Partition] = field(default_factory=dict)
    first_time: float | None = None
    last_time: float | None = None
    finished_at: float | None = None
    error: str = ""
    assembled: ProofAssembled | None = None
    # A PoRep proof is assembled (and its line logged) before the self-check runs (engine.rs):
    # the job counts as completed until a FAILED verdict turns it into a failure.
    self_check: bool | None = None
    # Scheduler (scheduler.rs "job enqueued" / "job dequeued for proving") and budget
    # (engine.rs "dispatching per-partition synthesis (budget-gated)") waits before SYNTH_START.
    enqueued_at: float | None = None
    dequeued_at: float | None = None
    dispatched_at: float | None = None
    batch_leader: str | None = None  # a batch member shown with its batch's first request's phases
    # Upstream's monolithic GPU queue keys every job (0, 0) (engine.rs PriorityWorkQueue::push): a
    # later job replaced this one, which is then lost (its finished_at: when the winner was queued).
    overtaken_by: str | None = None
    # (timestamp, message) of the line that failed it when that line names no job (engine.rs logs none on
    # some paths): how the Logs screen's job filter finds it.
    failed_by: tuple[float, str] | None = None
    # The earliest SYNTH_START of its partitions, kept as they start (start_synthesis): the waterfall
    # orders every job by it on each change, and taking the min over the partitions each time cost a
    # quarter of a frame.
    _first_start: float | None = field(default=None, init=False, repr=False)

    @property
    def scheduler_wait_s(self) -> float | None:
        return _span(self.enqueued_at, self.dequeued_at)

    @property
    def budget_wait_s(self) -> float | None:
        return _span(self.dispatched_at, self.first_start)

    @property
    def key(self) -> tuple[int, str]:
        return (self.segment, self.job_id)

    @property
    def first_start(self) -> float | None:
        """The earliest SYNTH_START of the job (the job has no start event of its own)."""
        return self._first_start

    def start_synthesis(self, partition: Partition, t: float | None) -> None:
        """Set ``partition``'s SYNTH_START to ``t``, keeping :attr:`first_start` the earliest of them."""
        before, partition.synth_start = partition.synth_start, t
        if t is not None and (self._first_start is None or t < self._first_start):
            self._first_start = t
        elif before is not None and before == self._first_start and t != before:
            # The earliest one moved later (a repeated SYNTH_START): another partition may be first now.
            starts = (p.synth_start for p in self.partitions.values() if p.synth_start is not None)
            self._first_start = min(starts, default=None)

    @property
    def synth_ms_total(self) -> int:
        """Sum of the reported per-partition synth_ms (what AwaitProof calls synthesis_ms)."""
        return sum(p.synth_ms or 0 for p in self.partitions.values())

    @property
    def gpu_ms_total(self) -> int:
        """Sum of the reported per-partition gpu_ms (what AwaitProof calls gpu_compute_ms)."""
        return sum(p.gpu_ms or 0 for p in self.partitions.values())


@dataclass(slots=True)
class Segment:
    """One daemon run; ``origin`` is the axis time of TIMELINE offset 0."""

    index: int
    origin: float
    anchored: bool = False
    daemon_start: float | None = None
    engine_started: bool = False
    first_time: float | None = None
    last_time: float | None = None
    jobs: int = 0
    completed: int = 0
    failed: int = 0
    incomplete: int = 0
    lost: int = 0
    ended: bool = False
    pipeline_enabled: bool | None = None  # "starting cuzk engine pipeline_enabled=…"
    # When a SIGINT stopped this run's engine (axis time; EngineShutdown): it proved nothing after it.
    shutdown_at: float | None = None

    def _see(self, t: float) -> None:
        if self.first_time is None or t < self.first_time:
            self.first_time = t
        if self.last_time is None or t > self.last_time:
            self.last_time = t


class LaneEntry(NamedTuple):
    """A worker's hold of one partition, pickup -> GPU_END (``end`` None: still open)."""

    start: float
    end: float | None
    segment: int
    job_id: str
    partition: int


class WorkerUse(NamedTuple):
    """A GPU worker's use of a window of time (Timeline.worker_use)."""

    busy_share: float  # the fraction of the window it held a partition (0 for an empty window)
    idle_gaps: list[tuple[float, float]]  # the stretches long enough to count in which it held nothing


class PipelineNow(NamedTuple):
    """Partitions of the current daemon run in each stage right now."""

    synthesizing: int
    waiting_gpu: int
    on_gpu: int


@dataclass(frozen=True, slots=True)
class TimelineStats:
    """The summary figures of a timeline (counters include evicted jobs)."""

    segments: int
    jobs_seen: int
    running: int
    completed: int
    failed: int
    incomplete: int
    lost: int
    pipeline: PipelineNow
    mean_synth_s: float | None
    mean_queue_wait_s: float | None
    mean_gpu_s: float | None
    proofs_per_hour_segment: float | None  # the current daemon run, first start -> last event
    proofs_per_hour_window: float | None  # completions in the last ``window_s``
    window: tuple[float, float] | None
    gpu_busy: dict[int, float]  # worker id -> busy fraction over ``window``
    unattached_cuzk_timings: int


class _Mean:
    __slots__ = ("n", "total")

    def __init__(self) -> None:
        self.n = 0
        self.total = 0.0

    def add(self, value: float | None) -> None:
        if value is not None:
            self.n += 1
            self.total += value

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None


class Timeline:
    """The waterfall model; see the module docstring. Not thread-safe: feed it from one thread."""

    def __init__(self, max_jobs: int = DEFAULT_MAX_JOBS) -> None:
        if max_jobs < 1:
            raise ValueError("max_jobs must be at least 1")
        self.max_jobs = max_jobs
        self.version = 0  # incremented on every change; the UI redraws when it moved
        self.jobs_seen = 0
        self.completed = 0
        self.failed = 0
        self.incomplete = 0
        self.lost = 0
        self.unattached_cuzk_timings = 0
        self.unattached: deque[CuzkTiming] = deque(maxlen=_UNATTACHED_KEPT)
        self._segments: list[Segment] = []
        self._jobs: dict[tuple[int, str], Job] = {}
        self._running: dict[tuple[int, str], Job] = {}
        self._finished: dict[tuple[int, str], None] = {}  # in finishing order, for eviction
        self._lanes: dict[int, _Lane] = {}
        self._lane_dead = 0
        self._open_gpu: dict[Partition, None] = {}
        self._worker_gpu: dict[int, int] = {}
        self._completions: deque[float] = deque(maxlen=max_jobs)
        self._synth = _Mean()
        self._queue = _Mean()
        self._gpu = _Mean()
        self._min_time: float | None = None
        self._max_time: float | None = None
        self._batch_leader: Job | None = None
        self._dequeued: deque[Job] = deque(maxlen=_DEQUEUED_KEPT)  # the last jobs the dispatcher took
        self.overtaken: list[Job] = []  # in the order they were noticed (bounded by jobs seen)
        # The last jobs that failed, in the order they did (``failed`` counts them all): a reader that
        # tracks ``failed`` finds the ones it has not seen here.
        self.recent_failures: deque[Job] = deque(maxlen=_UNATTACHED_KEPT)

    # ---------------------------------------------------------------------------- feeding

    def apply(self, event: LogEvent) -> bool:
        """Update the model with one event; True when anything changed (``version`` moved)."""
        handler = _HANDLERS.get(type(event))
        if handler is None or not handler(self, event):
            return False
        self.version += 1
        return True

    def _see(self, segment: Segment, t: float) -> None:
        segment._see(t)
        if self._min_time is None or t < self._min_time:
            self._min_time = t
        if self._max_time is None or t > self._max_time:
            self._max_time = t

    def _current(self) -> Segment:
        if not self._segments:
            return self._open_segment(None)
        return self._segments[-1]

    def _open_segment(self, daemon_start: float | None) -> Segment:
        if self._segments:
            self._end_segment(self._segments[-1])
        # Until the engine start anchors it, place the run after everything seen so far.
        origin = daemon_start if daemon_start is not None else (self._max_time or 0.0)
        segment = Segment(len(self._segments), origin, daemon_start=daemon_start)
        self._segments.append(segment)
        return segment

    def _end_segment(self, segment: Segment) -> None:
        if segment.ended:
            return
        segment.ended = True
        for job in list(self._running.values()):
            job.status = "incomplete"
            job.finished_at = segment.last_time
            for p in job.partitions.values():
                if p.gpu_end is None and not p.failed and p.synth_start is not None:
                    p.incomplete = True
            segment.incomplete += 1
            self.incomplete += 1
            self._finish(job)
        self._open_gpu.clear()

    def daemon_exited(self, t: float) -> bool:
        """The current daemon run's process ended at wall time ``t`` (the supervisor saw it die).

        Work still open in that run ran until then: an OOM kill stops syntheses mid-way, and their
        bars must reach the kill, not stop at the run's last log line. (Unanchored runs have no
        wall-clock axis, so only their end is recorded.)
        """
        if not self._segments or self._segments[-1].ended:
            return False
        segment = self._segments[-1]
        if segment.anchored:
            self._see(segment, t)
        self._end_segment(segment)
        self.version += 1
        return True

    def _on_daemon_starting(self, event: DaemonStarting) -> bool:
        current = self._segments[-1] if self._segments else None
        if current is not None and current.jobs == 0 and not current.engine_started and not current.ended:
            current.daemon_start = event.ts  # a log that began with a few lines of this run
            if event.ts is not None and not current.anchored:
                current.origin = event.ts
            return True
        self._open_segment(event.ts)
        return True

    def _on_engine_started(self, event: EngineStarted) -> bool:
        segment = self._current()
        if segment.engine_started or segment.jobs:
            segment = self._open_segment(event.ts)
        segment.engine_started = True
        segment.pipeline_enabled = event.pipeline_enabled
        if event.ts is not None:
            segment.origin = event.ts
            segment.anchored = True
            self._see(segment, event.ts)
        return True

    def _on_engine_shutdown(self, event: EngineShutdown) -> bool:
        segment = self._current()
        if segment.shutdown_at is not None:
            return False  # the handler's line, then the engine's: the first says when
        t = self._axis_time(segment, event.ts)
        segment.shutdown_at = t if t is not None else segment.origin
        if t is not None:
            self._see(segment, t)
        return True

    def _on_log_record(self, event: LogRecord) -> bool:
        if event.message in _SYNTH_COMPLETE:
            return self._on_synth_complete(event)
        if event.message not in _WORKER_STARTED:
            return False
        worker, gpu = event.fields.get("worker_id", ""), event.fields.get("gpu", "")
        if not (worker.isascii() and worker.isdigit() and gpu.isascii() and gpu.isdigit()):
            return False
        self._worker_gpu[int(worker)] = int(gpu)
        return True

    def _on_synth_complete(self, event: LogRecord) -> bool:
        """``partition synthesis complete … is_pinned=`` (pipeline.rs): whether the pinned pool served it."""
        pinned = event.fields.get("is_pinned")
        job_id = _field_from_spans(event, "job_id")
        partition = _int(event.fields.get("partition"))
        if pinned not in ("true", "false") or job_id is None or partition is None:
            return False
        p = self._find_partition(job_id, None, partition)
        if p is None:
            return False
        p.is_pinned = pinned == "true"
        return True

    def _on_queued(self, event: JobQueued) -> bool:
        segment = self._current()
        t = self._axis_time(segment, event.ts)
        job = self._jobs.get((segment.index, event.job_id)) or self._job(segment, event.job_id)
        if event.proof_kind and job.kind is None:
            job.kind = event.proof_kind
        if event.stage == "enqueued":
            job.enqueued_at = t
            if segment.pipeline_enabled is False:
                # Without the pipeline every job is monolithic and the scheduler's queue is its GPU queue.
                job.monolithic = True
                self._partition(job, 0).gpu_queue = t
        elif event.stage == "dequeued":
            job.dequeued_at = t
            self._dequeued.append(job)
        else:
            job.dispatched_at = t
        self._touch(segment, job, t)
        return True

    def _touch(self, segment: Segment, job: Job, t: float | None) -> None:
        if t is None:
            return
        if job.first_time is None or t < job.first_time:
            job.first_time = t
        if job.last_time is None or t > job.last_time:
            job.last_time = t
        self._see(segment, t)

    def _on_monolithic_processing(self, event: MonolithicProcessing) -> bool:
        """The monolithic worker took the job (engine.rs): from here to its proof line it holds the GPU."""
        if event.job_id is None:
            return False
        segment = self._current()
        t = self._axis_time(segment, event.ts)
        if t is None:
            return False
        job = self._jobs.get((segment.index, event.job_id)) or self._job(segment, event.job_id)
        job.monolithic = True
        if event.proof_kind and job.kind is None:
            job.kind = event.proof_kind
        p = self._partition(job, 0)
        if p.gpu_queue is None:
            p.gpu_queue = job.enqueued_at
        p.gpu_pickup = p.gpu_start = t
        self._queue.add(p.queue_wait_s)
        self._on_lane(p, event.worker_id, t)
        if job.status == "running":
            self._open_gpu[p] = None
        self._touch(segment, job, t)
        return True

    def _check_overtaken(self, segment: Segment, winner: Job, queued_at: float | None) -> None:
        """Upstream's monolithic GPU queue keys every entry (0, 0) (engine.rs PriorityWorkQueue::push),
        so a job queued before ``winner`` that was never picked up was replaced, not passed: it is lost
        (engine.rs logs nothing then; its caller is never answered), from when ``winner`` was queued."""
        if queued_at is None:
            return
        replaced = []
        for job in self._running.values():
            if job is winner or job.segment != segment.index or not job.monolithic:
                continue
            p = job.partitions.get(0)
            if p is not None and p.gpu_queue is not None and p.gpu_pickup is None and p.gpu_queue <= queued_at:
                replaced.append(job)
        for job in replaced:
            job.overtaken_by = winner.job_id
            job.status = "lost"
            job.finished_at = queued_at
            segment.lost += 1
            self.lost += 1
            self.overtaken.append(job)
            self._finish(job)

    def _job(self, segment: Segment, job_id: str) -> Job:
        key = (segment.index, job_id)
        job = self._jobs.get(key)
        if job is None:
            job = Job(segment.index, job_id)
            self._jobs[key] = job
            self._running[key] = job
            segment.jobs += 1
            self.jobs_seen += 1
        return job

    def _partition(self, job: Job, index: int) -> Partition:
        p = job.partitions.get(index)
        if p is None:
            p = job.partitions[index] = Partition(job, index)
        return p

    def _on_timeline(self, event: TimelineEvent) -> bool:
        segment = self._current()
        existing = self._jobs.get((segment.index, event.job_id))
        if existing is not None and existing.monolithic:
            index: int | None = 0  # WindowPoSt's GPU_END names a partition of the request, not ours
        elif event.monolithic and (existing is None or not existing.partitions):
            index = 0
        else:
            index = event.partition
        if index is None:
            return False
        t = segment.origin + event.offset_ms / 1000.0
        job = existing or self._job(segment, event.job_id)
        if event.monolithic and not job.partitions:
            job.monolithic = True
        if event.monolithic and "kind" in event.detail:
            job.kind = event.detail["kind"]
        p = self._partition(job, index)
        name = event.event
        if name == "SYNTH_START":
            job.start_synthesis(p, t)
        elif name == "SYNTH_END":
            p.synth_end = t
            p.synth_ms = _int(event.detail.get("synth_ms"))
            self._synth.add(p.synth_s)
        elif name == "GPU_QUEUE":
            p.gpu_queue = t
        elif name == "GPU_PICKUP":
            p.gpu_pickup = t
            self._queue.add(p.queue_wait_s)
            self._on_lane(p, event.worker, t)
        elif name == "GPU_START":
            p.gpu_start = t
            self._on_lane(p, event.worker, t)
            if job.status == "running":
                self._open_gpu[p] = None
        elif name == "GPU_END":
            p.gpu_end = t
            p.gpu_ms = _int(event.detail.get("gpu_ms"))
            self._gpu.add(p.gpu_s)
            self._on_lane(p, event.worker, t)
            self._hold_ended(p)
            self._open_gpu.pop(p, None)
            if job.monolithic:
                self._check_overtaken(segment, job, p.gpu_queue)
        else:
            return False
        if job.first_time is None or t < job.first_time:
            job.first_time = t
        if job.last_time is None or t > job.last_time:
            job.last_time = t
        self._see(segment, t)
        return True

    def _on_lane(self, p: Partition, worker: int | None, t: float) -> None:
        if worker is None:
            return
        if p.worker is None:
            p.worker = worker
        if p.lane_start is None:
            p.lane_start = t
            self._lanes.setdefault(worker, _Lane()).add(p, t)

    def _lane_of(self, p: Partition) -> _Lane:
        """The lane ``p`` joined: its worker's, unless it had a worker before it joined one (a batch
        member's copied phases)."""
        lane = self._lanes.get(p.worker) if p.worker is not None else None
        if lane is not None and lane.index(p) is not None:
            return lane
        return next(lane for lane in self._lanes.values() if lane.index(p) is not None)

    def _hold_ended(self, p: Partition) -> None:
        """``p`` has a GPU_END now: its hold, if it has one, closes there."""
        if p.lane_start is not None:
            self._lane_of(p).close(p)

    def _axis_time(self, segment: Segment, ts: float | None) -> float | None:
        """A printed timestamp on the axis (only meaningful once the run is anchored)."""
        if ts is not None and segment.anchored:
            return ts
        return segment.last_time

    def _on_assembled(self, event: ProofAssembled) -> bool:
        segment = self._current()
        if event.job_id is not None:
            job = self._jobs.get((segment.index, event.job_id)) or self._job(segment, event.job_id)
        else:
            found = self._oldest_finished_monolithic(segment)
            if found is None:
                return False
            job = found
        return self._complete(segment, job, event)

    def _complete(self, segment: Segment, job: Job, event: ProofAssembled) -> bool:
        if job.status != "running":
            return False
        t = self._axis_time(segment, event.ts)
        p = job.partitions.get(0) if job.monolithic else None
        if p is not None and p.gpu_start is not None and p.gpu_end is None and t is not None:
            # The monolithic worker's proof line ends its hold of the GPU (no TIMELINE in that mode).
            p.gpu_end = t
            self._gpu.add(p.gpu_s)
            self._hold_ended(p)
        job.status = "completed"
        job.assembled = event
        job.finished_at = t
        segment.completed += 1
        self.completed += 1
        if t is not None:
            self._see(segment, t)
            self._completions.append(t)
        self._finish(job)
        return True

    def _oldest_finished_monolithic(self, segment: Segment) -> Job | None:
        """The monolithic completion line has no job id outside a span: the GPU-ended one."""
        ended = [
            (p.gpu_end, job)
            for job in self._running.values()
            if job.segment == segment.index and job.monolithic
            for p in job.partitions.values()
            if p.gpu_end is not None
        ]
        return min(ended, key=lambda item: item[0])[1] if ended else None

    def _on_failed(self, event: ProofFailedLine) -> bool:
        segment = self._current()
        followers: list[Job] = []
        if event.job_id is None:
            found = self._attribute_failure(segment, event)
            if not found:
                return False
            job, *followers = found
        else:
            job = self._jobs.get((segment.index, event.job_id)) or self._job(segment, event.job_id)
        index = 0 if job.monolithic else event.partition
        if index is not None:
            self._partition(job, index).failed = True
        t = self._axis_time(segment, event.ts)
        for failed in (job, *followers):
            if not failed.error:
                failed.error = event.error or event.message
            if event.job_id is None and event.ts is not None and failed.status == "running":
                failed.failed_by = (event.ts, event.message)
            if failed.status == "running":
                self._fail(segment, failed, t)
        return True

    def _batch_followers(self, segment: Segment, leader: Job) -> list[Job]:
        """The other requests of ``leader``'s batch: a batched proof's failure fails them all
        (engine.rs ``process_monolithic_result``), but only the first request had TIMELINE lines —
        the others are the same kind's jobs taken off the scheduler before the batch's synthesis
        began that never got a phase of their own."""
        start = leader.first_start
        if start is None or leader.kind is None:
            return []
        return [
            job
            for job in self._running.values()
            if job is not leader
            and job.segment == segment.index
            and job.kind == leader.kind
            and not job.partitions
            and job.dequeued_at is not None
            and job.dequeued_at <= start
        ]

    def _fail(self, segment: Segment, job: Job, t: float | None) -> None:
        job.status = "failed"
        job.finished_at = t
        segment.failed += 1
        self.failed += 1
        self.recent_failures.append(job)
        if t is not None:
            self._see(segment, t)
        self._finish(job)

    def _attribute_failure(self, segment: Segment, event: ProofFailedLine) -> list[Job]:
        """The jobs a failure line without a job id belongs to (engine.rs logs none on these paths), the
        one whose phase failed first.

        An ERROR in the synthesis dispatcher's span (a C1 / SnapDeals parse or SRS-load failure, a build
        without CUDA, any text) fails the batch the dispatcher last dequeued, before its synthesis; the
        monolithic path's failures belong to its open job, the one in the phase that failed (the oldest
        such, as the GPU queue is FIFO), and to the rest of that job's batch.
        """
        message = event.message
        if message in _PARSE_FAILURES or (event.dispatch is not None and message not in _MONOLITHIC_FAILURES):
            return self._dispatched(segment, event.dispatch)
        open_jobs = [j for j in self._running.values() if j.segment == segment.index and j.monolithic]
        synthesis = "synthesis" in message

        def in_phase(job: Job) -> bool:
            p = job.partitions.get(0)
            if p is None:
                return False
            if synthesis:
                return p.synth_start is not None and p.synth_end is None
            return p.gpu_pickup is not None and p.gpu_end is None

        candidates = [j for j in open_jobs if in_phase(j)] or open_jobs
        if not candidates:
            return self._dispatched(segment, event.dispatch) if event.dispatch is not None else []
        job = min(candidates, key=_job_order)
        return [job, *self._batch_followers(segment, job)]

    def _dispatched(self, segment: Segment, span: Span | None) -> list[Job]:
        """The running jobs of the batch the synthesis dispatcher took last (scheduler.rs "job dequeued for
        proving"; process_batch runs one batch at a time unless synthesis_concurrency > 1): the last
        ``batch_size`` dequeued of the span's proof kind, oldest first."""
        kind = span.fields.get("proof_kind") if span is not None else None
        size = (_int(span.fields.get("batch_size")) if span is not None else None) or 1
        found: list[Job] = []
        for job in reversed(self._dequeued):
            if len(found) == size:
                break
            if job.segment == segment.index and (kind is None or job.kind in (None, kind)):
                if job.status != "running":
                    break  # an older batch's: this batch is all there is
                found.append(job)
        return found[::-1]

    def fail_job(self, job_id: str, error: str, t: float | None) -> bool:
        """The RPC result says the job failed (a line without a job id left it running)."""
        if not self._segments:
            return False
        segment = self._segments[-1]
        job = self._jobs.get((segment.index, job_id))
        if job is None or job.status != "running":
            return False
        job.error = job.error or error
        self._fail(segment, job, t if segment.anchored else segment.last_time)
        self.version += 1
        return True

    def _on_self_check(self, event: SelfCheck) -> bool:
        if event.job_id is None:
            return False
        segment = self._current()
        job = self._jobs.get((segment.index, event.job_id))
        if job is None:
            return False
        job.self_check = event.passed
        if event.passed:
            return True
        job.error = job.error or f"PoRep proof self-check failed{': ' + event.error if event.error else ''}"
        t = self._axis_time(segment, event.ts)
        if job.status == "running":
            self._fail(segment, job, t)
        elif job.status == "completed":
            # The proof line came first; the verdict undoes the completion (engine.rs Phase 7).
            segment.completed -= 1
            self.completed -= 1
            if job.finished_at is not None and job.finished_at in self._completions:
                self._completions.remove(job.finished_at)
            job.status = "failed"
            segment.failed += 1
            self.failed += 1
            self.recent_failures.append(job)
        return True

    def _on_batch_split(self, event: BatchSplit) -> bool:
        self._batch_leader = self._oldest_finished_monolithic(self._current())
        return self._batch_leader is not None

    def _on_batch_member(self, event: BatchMemberDelivered) -> bool:
        """Each sector of a batch gets its proof; only the first request had TIMELINE lines (engine.rs),
        so the others are shown with the batch's phases."""
        segment = self._current()
        job = self._jobs.get((segment.index, event.job_id)) or self._job(segment, event.job_id)
        leader = self._batch_leader
        if leader is not None and leader is not job and not job.partitions and 0 in leader.partitions:
            source = leader.partitions[0]
            p = self._partition(job, 0)
            job.start_synthesis(p, source.synth_start)
            for name in ("synth_end", "gpu_queue", "gpu_pickup", "gpu_start", "gpu_end"):
                setattr(p, name, getattr(source, name))
            p.worker = source.worker
            job.monolithic = True
            job.batch_leader = leader.job_id
            job.kind = job.kind or leader.kind
            self._touch(segment, job, source.synth_start)
            self._touch(segment, job, source.gpu_end)
        return self._complete(segment, job, ProofAssembled(event.ts, event.job_id, None, event.total_ms, None, None))

    def _on_ntt_timing(self, event: NttTiming) -> bool:
        p = self._single_open_gpu(None)
        if p is None:
            return False
        p.ntt_timing.update(event.values)
        return True

    def _on_detail_lines(self, event: DetailLines) -> bool:
        """A run of C++ timing lines read while nothing else happened: one owner for all of them, as
        each would have had (_on_cuzk_timing, _on_ntt_timing); kept unparsed when there is one."""
        p = self._single_open_gpu(event.gpu)
        if p is not None:
            p.keep_unread(event)
            return True
        changed = False
        for timing in timing_events(event.text):
            if isinstance(timing, CuzkTiming):
                changed = self._on_cuzk_timing(timing) or changed
            else:
                changed = self._on_ntt_timing(timing) or changed
        return changed

    def _single_open_gpu(self, gpu: int | None) -> Partition | None:
        """The one partition on a GPU (of ordinal ``gpu`` when known) a stderr line can belong to."""
        candidates = [
            p for p in self._open_gpu if gpu is None or p.worker is None or self._worker_gpu.get(p.worker, gpu) == gpu
        ]
        return candidates[0] if len(candidates) == 1 else None

    def _finish(self, job: Job) -> None:
        self._running.pop(job.key, None)
        for p in job.partitions.values():
            self._open_gpu.pop(p, None)
        self._finished[job.key] = None
        while len(self._finished) > self.max_jobs:
            key = next(iter(self._finished))
            del self._finished[key]
            evicted = self._jobs.pop(key)
            for p in evicted.partitions.values():
                if p.lane_start is not None:
                    self._lane_of(p).evict(p)
                    self._lane_dead += 1
        if self._lane_dead > self.max_jobs:
            for lane in self._lanes.values():
                lane.compact()
            self._lane_dead = 0

    def _find_partition(self, job_id: str | None, worker: int | None, partition: int | None) -> Partition | None:
        segment = self._current()
        if job_id is not None:
            job = self._jobs.get((segment.index, job_id))
            index = 0 if job is not None and job.monolithic else partition
            return None if job is None or index is None else job.partitions.get(index)
        if worker is None:
            return None
        lane = self._lanes.get(worker)
        for p in reversed(lane.parts[-_LANE_LOOKBACK:] if lane is not None else []):
            if p.job.segment != segment.index:
                break
            if (p.index == partition and not p.job.monolithic) or (partition is None and p.job.monolithic):
                return p
        return None

    def _on_worker_timing(self, event: GpuTiming | FinTiming) -> bool:
        p = self._find_partition(event.job_id, event.worker_id, event.partition)
        if p is None or not event.values:
            return False
        (p.gpu_timing if isinstance(event, GpuTiming) else p.fin_timing).update(event.values)
        return True

    def _on_cuzk_timing(self, event: CuzkTiming) -> bool:
        if not event.values:
            return False
        p = self._single_open_gpu(event.gpu)
        if p is not None:
            p.cuzk_timing.update(event.values)
        else:
            self.unattached.append(event)
            self.unattached_cuzk_timings += 1
        return True

    # ---------------------------------------------------------------------------- queries

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(self._segments)

    @property
    def in_flight(self) -> int:
        """Jobs of the current daemon run not finished yet (queued, proving or assembling)."""
        return len(self._running)

    def time_span(self) -> tuple[float, float] | None:
        """(earliest, latest) axis time seen in the whole session, or None before any."""
        if self._min_time is None or self._max_time is None:
            return None
        return (self._min_time, self._max_time)

    def job(self, segment: int, job_id: str) -> Job | None:
        return self._jobs.get((segment, job_id))

    def jobs(self, start: float | None = None, end: float | None = None) -> list[Job]:
        """Retained jobs that overlap [start, end], ordered by first start (then first event)."""
        selected = []
        for job in self._jobs.values():
            first, last = job.first_time, job.finished_at if job.finished_at is not None else job.last_time
            if first is None:
                first = last
            if first is None:
                continue
            stop = last if job.status != "running" and last is not None else float("inf")
            if (end is None or first <= end) and (start is None or stop >= start):
                selected.append(job)
        selected.sort(key=_job_order)
        return selected

    def open_end(self, item: Partition | Job, now: float | None) -> float:
        """Where an interval without an end stops: a partition's GPU_END, else its job's end, its
        daemon run's end (a run that ended), or ``now`` while both still run."""
        partition = item if isinstance(item, Partition) else None
        job = item.job if isinstance(item, Partition) else item
        if partition is not None and partition.gpu_end is not None:
            return partition.gpu_end
        if job.finished_at is not None:
            return job.finished_at
        segment = self._segments[job.segment]
        if segment.ended or now is None:
            if segment.last_time is not None:
                return segment.last_time
            start = partition.lane_start if partition is not None else job.first_time
            return start or 0.0
        return now

    def worker_gpu(self, worker: int) -> int | None:
        """The ordinal of the GPU a worker proves on, from its start line; None before that line.

        engine.rs numbers workers across GPUs (``gpu_workers_per_device`` per GPU, in ``gpus.devices``
        order) and only the start lines name the ordinal; a restart with other devices re-maps them.
        """
        return self._worker_gpu.get(worker)

    def workers(self) -> list[int]:
        """The ids of the workers that have a lane (the keys of :meth:`lanes`), without walking the lanes."""
        return sorted(self._lanes)

    def lanes(self, start: float | None = None, end: float | None = None) -> dict[int, list[LaneEntry]]:
        """Per worker id, the lane entries overlapping [start, end], ordered by start."""
        low = -math.inf if start is None else start
        high = math.inf if end is None else end
        return {
            worker: [entry for _, stop, entry in self.lane_holds(worker, low, high, end) if stop >= low]
            for worker in sorted(self._lanes)
        }

    def lane_holds(
        self, worker: int, start: float, end: float, now: float | None
    ) -> list[tuple[float, float, LaneEntry]]:
        """The worker's holds that start by ``end`` from the first that reaches ``start``, in start order, as
        (start, stop, entry): an open hold stops where :meth:`open_end` puts it at ``now``. One that ends
        before ``start`` after a longer one that does not is kept (it draws nothing).

        Found by bisection in the index the lane keeps as holds open and close (:class:`_Lane`), so a
        window costs the holds in it and the few still open, not every hold of the session."""
        lane = self._lanes.get(worker)
        if lane is None:
            return []
        first, stop = bisect_left(lane.reach, start), bisect_right(lane.starts, end)
        still_open = []
        for p in lane.open:
            i = lane.index(p)
            assert i is not None  # an open hold is in its lane
            until = self.open_end(p, now)
            if until >= start:
                first = min(first, i)
            still_open.append((i, (lane.starts[i], until, LaneEntry(lane.starts[i], None, *_entry_of(p)))))
        holds = lane.closed[first:stop]
        for i, hold in still_open:
            if first <= i < stop:
                holds[i - first] = hold
        return [hold for hold in holds if hold is not None]  # None: a hold of an evicted job

    def _busy_intervals(self, worker: int, start: float, end: float) -> list[tuple[float, float]]:
        """The merged busy intervals of one worker, clipped to [start, end]."""
        merged: list[tuple[float, float]] = []
        for lane_start, until, _ in self.lane_holds(worker, start, end, end):
            a, b = max(lane_start, start), min(until, end)
            if b <= a:
                continue
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        return merged

    def busy_fraction(self, start: float, end: float) -> dict[int, float]:
        """Per worker, the fraction of [start, end] it held a partition (0 for an empty window)."""
        return {w: _share(self._busy_intervals(w, start, end), end - start) for w in self.workers()}

    def worker_use(self, worker: int, start: float, end: float, min_gap_s: float = 0.0) -> WorkerUse:
        """How much of [start, end] the worker held a partition, and the stretches of at least ``min_gap_s``
        in which it held nothing (one walk of its lane for both)."""
        busy = self._busy_intervals(worker, start, end)
        gaps = []
        cursor = start
        for a, b in [*busy, (end, end)]:
            if a > cursor and a - cursor >= min_gap_s:
                gaps.append((cursor, a))
            cursor = max(cursor, b)
        return WorkerUse(_share(busy, end - start), gaps)

    def pipeline_now(self) -> PipelineNow:
        """Partitions of the running jobs synthesizing, waiting for a GPU, and on a GPU."""
        synth = waiting = gpu = 0
        for job in self._running.values():
            for p in job.partitions.values():
                if p.failed:
                    continue
                if p.gpu_pickup is not None:
                    gpu += p.gpu_end is None
                elif p.synth_end is not None or p.gpu_queue is not None:
                    waiting += 1
                elif p.synth_start is not None:
                    synth += 1
        return PipelineNow(synth, waiting, gpu)

    def proofs_per_hour(self, window_s: float | None = None, now: float | None = None) -> float | None:
        """Completions per hour: over the last ``window_s`` before ``now`` (default: the latest
        time seen), or over the current daemon run (first event -> last event) when no window."""
        if window_s is None:
            if not self._segments:
                return None
            seg = self._segments[-1]
            if seg.first_time is None or seg.last_time is None or seg.last_time <= seg.first_time:
                return None
            return seg.completed * 3600.0 / (seg.last_time - seg.first_time)
        end = now if now is not None else self._max_time
        if end is None or window_s <= 0:
            return None
        count = sum(1 for t in self._completions if end - window_s < t <= end)
        return count * 3600.0 / window_s

    def stats(self, window_s: float = 600.0, now: float | None = None) -> TimelineStats:
        """The summary; the window (for busy fraction and the windowed rate) ends at ``now``."""
        end = now if now is not None else self._max_time
        window = None if end is None else (end - window_s, end)
        return TimelineStats(
            segments=len(self._segments),
            jobs_seen=self.jobs_seen,
            running=len(self._running),
            completed=self.completed,
            failed=self.failed,
            incomplete=self.incomplete,
            lost=self.lost,
            pipeline=self.pipeline_now(),
            mean_synth_s=self._synth.mean,
            mean_queue_wait_s=self._queue.mean,
            mean_gpu_s=self._gpu.mean,
            proofs_per_hour_segment=self.proofs_per_hour(),
            proofs_per_hour_window=self.proofs_per_hour(window_s, end),
            window=window,
            gpu_busy={} if window is None else self.busy_fraction(*window),
            unattached_cuzk_timings=self.unattached_cuzk_timings,
        )


# Dispatch by exact event type (log events are final classes): one dict lookup per line.
_HANDLERS: Final[dict[type[Any], Callable[[Timeline, Any], bool]]] = {
    TimelineEvent: Timeline._on_timeline,
    GpuTiming: Timeline._on_worker_timing,
    FinTiming: Timeline._on_worker_timing,
    CuzkTiming: Timeline._on_cuzk_timing,
    ProofAssembled: Timeline._on_assembled,
    ProofFailedLine: Timeline._on_failed,
    DaemonStarting: Timeline._on_daemon_starting,
    EngineStarted: Timeline._on_engine_started,
    EngineShutdown: Timeline._on_engine_shutdown,
    LogRecord: Timeline._on_log_record,
    JobQueued: Timeline._on_queued,
    MonolithicProcessing: Timeline._on_monolithic_processing,
    SelfCheck: Timeline._on_self_check,
    BatchSplit: Timeline._on_batch_split,
    BatchMemberDelivered: Timeline._on_batch_member,
    NttTiming: Timeline._on_ntt_timing,
    DetailLines: Timeline._on_detail_lines,
}

# engine.rs: the dispatcher's failures between dequeue and the first synthesis (no job id).
_PARSE_FAILURES: Final = frozenset({M.C1_PARSE_FAILED, "Phase 7: C1 parse task panicked", M.SNAP_PARSE_FAILED})
# engine.rs process_batch's monolithic path: failures of a synthesis that started (SYNTH_START), found by phase.
_MONOLITHIC_FAILURES: Final = frozenset({M.SYNTHESIS_FAILED, M.SYNTHESIS_TASK_PANICKED})
_SYNTH_COMPLETE: Final = frozenset({M.PARTITION_SYNTH_COMPLETE, M.SNAP_PARTITION_SYNTH_COMPLETE})
# engine.rs start(): each GPU worker's first line, with its worker_id and gpu (ordinal).
_WORKER_STARTED: Final = frozenset({M.PIPELINE_WORKER_STARTED, M.MONO_WORKER_STARTED})


def _share(intervals: list[tuple[float, float]], width: float) -> float:
    """The fraction of a window ``width`` long that disjoint ``intervals`` inside it cover."""
    return sum(b - a for a, b in intervals) / width if width > 0 else 0.0


def _field_from_spans(record: LogRecord, key: str) -> str | None:
    for span in reversed(record.spans):
        value = span.fields.get(key)
        if value is not None:
            return value
    return record.fields.get(key)


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isascii() and text.isdigit() else None


def _entry_of(p: Partition) -> tuple[int, str, int]:
    """What a lane entry says of the partition it holds: (segment, job id, partition)."""
    return p.job.segment, p.job.job_id, p.index


class _Lane:
    """One GPU worker's holds in start order, indexed as they open, close and are evicted, so that the holds
    reaching into a window are found by bisection (:meth:`Timeline.lane_holds`): rebuilt from every hold on
    each change, the lanes view cost a frame and a half at 1,000 jobs.

    ``reach`` is the running max of the closed holds' ends: the first hold a window sees is the first
    whose reach gets to the window's start, or an open hold (few: the ones on a GPU now, and those their
    daemon run left open) whose stop does. A hold's close or eviction restitches ``reach`` from it only
    until the max is what it was, which for holds one after the other is at the next one."""

    __slots__ = ("closed", "open", "parts", "reach", "starts")

    def __init__(self) -> None:
        self.parts: list[Partition] = []
        self.starts: list[float] = []  # their lane starts, the order
        # Per hold, (start, GPU_END, entry) once it closed; None while open, and once evicted.
        self.closed: list[tuple[float, float, LaneEntry] | None] = []
        self.reach: list[float] = []
        self.open: dict[Partition, None] = {}  # holds of retained jobs without a GPU_END

    def index(self, p: Partition) -> int | None:
        """Where ``p`` is in the lane, None when it is not in it."""
        if p.lane_start is None:
            return None
        i = bisect_left(self.starts, p.lane_start)
        while i < len(self.parts) and self.starts[i] == p.lane_start:
            if self.parts[i] is p:
                return i
            i += 1
        return None

    def add(self, p: Partition, start: float) -> None:
        """``p`` joined the lane at ``start`` (after the holds that started at the same time)."""
        i = bisect_right(self.starts, start)
        self.parts.insert(i, p)
        self.starts.insert(i, start)
        self.closed.insert(i, None)
        self.reach.insert(i, self.reach[i - 1] if i else -math.inf)
        self.open[p] = None
        if p.gpu_end is not None:  # a GPU_END that came first
            self.close(p)

    def close(self, p: Partition) -> None:
        """``p``'s hold has its GPU_END (again, when the log repeats one)."""
        i = self.index(p)
        assert i is not None and p.gpu_end is not None
        self.open.pop(p, None)
        self.closed[i] = (self.starts[i], p.gpu_end, LaneEntry(self.starts[i], p.gpu_end, *_entry_of(p)))
        self._restitch(i)

    def evict(self, p: Partition) -> None:
        """``p``'s job was evicted: its hold stays listed, showing nothing, until :meth:`compact`."""
        i = self.index(p)
        assert i is not None
        self.open.pop(p, None)
        self.closed[i] = None
        self._restitch(i)

    def compact(self) -> None:
        """Drop the holds of evicted jobs."""
        keep = [i for i, p in enumerate(self.parts) if self.closed[i] is not None or p in self.open]
        self.parts = [self.parts[i] for i in keep]
        self.starts = [self.starts[i] for i in keep]
        self.closed = [self.closed[i] for i in keep]
        self.reach = list(accumulate((-math.inf if hold is None else hold[1] for hold in self.closed), max))

    def _restitch(self, i: int) -> None:
        """``reach`` from hold ``i`` on, after its end changed: only as far as the running max moves."""
        reach, closed = self.reach, self.closed
        before = reach[i - 1] if i else -math.inf
        for j in range(i, len(reach)):
            hold = closed[j]
            value = before if hold is None else max(before, hold[1])
            if j > i and value == reach[j]:
                return
            reach[j] = value
            before = value


def _job_order(job: Job) -> tuple[float, int]:
    start = job.first_start
    if start is None:
        start = job.first_time if job.first_time is not None else (job.finished_at or 0.0)
    return (start, job.segment)
