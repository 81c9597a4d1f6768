"""The proving pipeline with the daemon's semantics (docs/daemon-interface.md §3.10, §6), on emulated time.

Scheduler queue (priority, then arrival) → batch tasks (``synthesis_concurrency``: parse, SRS,
split into partitions, or whole-proof synthesis for monolithic kinds and PoRep batches) → one
dispatcher admitting partitions in (job sequence, partition) order against the budget → a bounded
hand-off channel → synthesis workers (``synth_worker_count``) → GPU priority queue → GPU workers
(``gpu_workers_per_device`` per GPU sharing one mutex) → finalizers. Every duration logged
(``synth_ms``, TIMELINE offsets, ``gpu_ms`` …) is real wall-clock time of the engine, i.e. the
modelled time × ``time_scale``.

Memory of a partition (docs/daemon-interface.md §6.2, §6.4; real memory in :class:`~engine.memory.Arena`):

* Dispatch: the dispatcher reserves the kind's "full" amount (PoRep 14 GiB) and then sends the
  partition into a channel of capacity ``synth_worker_count`` (the daemon's
  ``mpsc::channel(synth_worker_count)``), blocking while it is full. So up to
  ``synth_worker_count`` + 1 partitions can hold a reservation while waiting for a worker; they
  are budget only, no RSS.
* Synthesis: the a/b/c vectors and the aux witness are filled constraint by constraint, so the
  partition's resident memory grows with the synthesis' progress (``GROWTH_STEPS`` equal steps,
  each mapped at the start of its share of the work) to the measured ≈ 16 GiB of a synthesized
  PoRep partition (a/b/c ≈ 12 GiB + aux ≈ 4 GiB). There is no extra scratch on top: the
  reference's per-partition measurements are 16 GiB synthesized and 4 GiB after the a/b/c free;
  the "20 GiB per concurrent partition" of §3.10 is a whole-daemon fit over the documented
  tiers (it also covers partitions parked for the GPU, in the GPU and in the finalizer), not the
  footprint of one synthesis, so charging it per synthesis would count the parked ones twice.
* Parked for the GPU: 16 GiB until the prove-start call returns, then the a/b/c go (−12 GiB,
  reservation −13 GiB); the aux (4 GiB) and the last 1 GiB of reservation go at finalize.
* Pinned (:mod:`engine.pinned`, docs/daemon-interface.md §6.6): once the circuit's capacity hint is cached (after
  its first synthesis completed), a partition synthesis first checks out three pinned a/b/c
  buffers of ``num_constraints × 32`` bytes (PoRep 3 × 3.88 GiB), resident in full from that
  moment (reused, or newly allocated at ≈ 1 s each), and its heap grows only by the rest of the
  16 GiB (the aux ≈ 4 GiB plus ≈ 0.35 GiB). At prove start the buffers are checked in instead of
  freed: they stay resident in the pool, outside the budget, until a blocked budget acquisition
  has the evictor free the idle ones.

Other kinds scale those figures by their reservation relative to PoRep's 14 GiB.

The GPU queue is keyed like upstream's (engine.rs ``PriorityWorkQueue``, a BTreeMap on
``(job_seq, partition)`` with ``job_seq`` counting from 0): every monolithic item (PoSt, multi-sector
batches) goes in at ``(0, 0)``, so one queued while another still waits replaces it and the first's
callers are never answered (docs/daemon-interface.md §11.18); partition 0 of the first pipeline shares that key.

Job tracking follows engine.rs ``JobTracker``: every caller (Prove, AwaitProof) has its own waiter,
results are delivered to all waiters of a job id and kept; a waiter that goes away (deadline,
cancel) never touches the job. Partition results are routed by job id to ``assemblers``.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Final

from cuzktui import daemon_messages as msg
from cuzktui.daemon_facts import (
    DEFAULT_MAX_PARALLEL_SYNTHESIS,
    PARTITION_BUDGET_UNIT,
    PARTITION_RSS_AFTER_ABC_FREE,
    SYNTHESIZED_PARTITION_RSS,
    KindFacts,
    ProofKind,
)
from cuzktui.proofinputs import InputError
from cuzktui.units import GiB

from . import inputs, timemodel, tracing
from .config import Config
from .jobs import (
    PRIORITY_NAMES,
    Job,
    JobResult,
    Partition,
    PartState,
    ProofRequest,
    Status,
    ms_since,
    partition_proof,
    rust_duration,
)
from .memory import Arena, Block, Budget, Reservation, gib
from .pinned import SCALAR_SIZE, PinnedBuffer, PinnedPool
from .prover import mono_synthesis_lines, prover_lines
from .queues import ClosableQueue
from .srs import CONSTRAINTS, Residency
from .timemodel import Clock, CpuPool
from .tracing import Logger, Quoted, Span, option

# A multi-sector PoRep batch reserves a flat 136 GiB whatever its size (docs/daemon-interface.md §6.2).
BATCH_RESERVATION: Final = 136 * GiB
BATCHABLE: Final = (ProofKind.POREP_SEAL_COMMIT, ProofKind.SNAP_DEALS_UPDATE)
# Emulated VRAM use: the d_a cache stays allocated after a GPU's first prove (CUZK_TIMING line),
# the working set only while a prove holds the GPU.
D_A_CACHE: Final = 4 * GiB
PROVE_VRAM: Final = 8 * GiB
COMPLETED_RETENTION_S: Final = 30.0  # /status keeps finished pipelines this long (real seconds)
DURATION_WINDOW: Final = 1000  # GetMetrics summarises the last ≤1000 completions
DEFAULT_MEM_TOTAL: Final = 256 * GiB  # what "auto" assumes when /proc/meminfo is unreadable
GROWTH_STEPS: Final = 8  # a synthesis maps its memory in this many steps as it progresses


def read_mem_total() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def budget_total(config: Config) -> int:
    """``auto`` = MemTotal − safety_margin in nominal bytes; the cgroup limit is not consulted."""
    if config.total_budget is not None:
        return config.total_budget
    mem_total = config.engine.mem_total
    if mem_total is None:
        real = read_mem_total()
        mem_total = DEFAULT_MEM_TOTAL if real is None else int(real / config.engine.memory_scale)
    return max(0, mem_total - config.safety_margin)


@dataclass(frozen=True, slots=True)
class RssShape:
    """Real memory of one synthesized circuit (measured figures, scaled by the kind's reservation)."""

    abc: int  # grown during synthesis, freed when the GPU prove start returns (PoRep 16 → 4 GiB)
    aux: int  # grown during synthesis, freed at finalize

    @classmethod
    def of(cls, facts: KindFacts) -> RssShape:
        ratio = facts.full_reservation / PARTITION_BUDGET_UNIT
        return cls(
            int((SYNTHESIZED_PARTITION_RSS - PARTITION_RSS_AFTER_ABC_FREE) * ratio),
            int(PARTITION_RSS_AFTER_ABC_FREE * ratio),
        )


@dataclass(eq=False, slots=True)
class GpuItem:
    """A synthesized partition (or whole proof / batch) on its way through the GPU."""

    jobs: list[Job]
    facts: KindFacts
    partition: int | None  # None = monolithic
    circuits: int
    reservation: Reservation
    abc: list[Block]
    aux: list[Block]
    synth_ms: int = 0
    started: float = 0.0  # monolithic: when synthesis started
    pinned: list[PinnedBuffer] = field(default_factory=list)  # a/b/c in pinned buffers (partitioned only)


@dataclass(slots=True)
class GpuWorker:
    worker_id: int
    gpu: int
    # engine.rs JobTracker.workers[].current_job: set when an item is picked up, cleared by that
    # item's finalizer whatever the worker does meanwhile; GetStatus and GetMetrics read it.
    job: Job | None = None
    kind: str = ""
    # status.rs GpuWorkerState: set and cleared only for partitions (partition_gpu_start/_end), so
    # monolithic work leaves the worker "idle" on /status.
    status_job: str | None = None
    partition: int | None = None
    busy_since: float | None = None


@dataclass(eq=False, slots=True)
class Assembler:
    """engine.rs ``PartitionedJobState``: the partition proofs of a job id, filled by GPU finalizers."""

    job: Job
    proofs: list[bytes | None]
    started: float = field(default_factory=time.monotonic)
    synth_ms: int = 0
    gpu_ms: int = 0
    failed: bool = False

    @property
    def complete(self) -> bool:
        return all(proof is not None for proof in self.proofs)


@dataclass(slots=True)
class Counters:
    completed: int = 0
    failed: int = 0
    completed_by_kind: dict[str, int] = field(default_factory=dict)
    failed_by_kind: dict[str, int] = field(default_factory=dict)
    durations: dict[str, deque[float]] = field(default_factory=dict)
    # /status counts only what status.rs ``job_completed`` is told: partitioned jobs (docs/daemon-interface.md §5).
    status_completed: int = 0
    status_completed_by_kind: dict[str, int] = field(default_factory=dict)
    status_failed: int = 0
    status_failed_by_kind: dict[str, int] = field(default_factory=dict)


class Engine:
    def __init__(self, config: Config, log: Logger) -> None:
        self.config = config
        self.log = log
        self.created = time.monotonic()
        self.clock = Clock(config.engine.time_scale)
        self.rng = random.Random(config.engine.seed)
        for message in config.deprecated_present:
            log.warn(tracing.CONFIG, message)
        self.budget = Budget(budget_total(config), log)
        self.arena = Arena(config.engine.memory_scale)
        threads = config.synthesis_threads or config.engine.cpus
        self.pool = CpuPool(min(threads, config.engine.cpus), self.clock)
        self.residency = Residency(
            self.budget, self.arena, self.clock, self.pool, log, config.param_cache, config.eviction_min_idle_s
        )
        self.pinned = PinnedPool(self.arena, self.clock, log)
        self.budget.evictor = self._evict  # pinned pool first, then SRS/PCE (docs/daemon-interface.md §6.5)
        log.info(tracing.ENGINE, msg.MEMORY_BUDGET_INITIALIZED, ("total_budget_gib", gib(self.budget.total)))
        log.info(tracing.ENGINE, msg.PINNED_POOL_INITIALIZED)
        # engine.rs JobTracker: waiters (``pending``) and kept results (``completed``) per job id.
        self.waiters: dict[str, list[asyncio.Future[JobResult]]] = {}
        self.results: dict[str, JobResult] = {}
        self.assemblers: dict[str, Assembler] = {}
        # engine.rs Engine.preloaded_srs: circuits a PreloadSRS actually loaded (never removed).
        self.preloaded_srs: dict[str, int] = {}
        self.pipelines: dict[str, Job] = {}  # status.rs StatusTracker.jobs: partitioned jobs by id
        self.scheduler: ClosableQueue[Job] = ClosableQueue()
        self.synth_queue: ClosableQueue[tuple[Job, Partition]] = ClosableQueue()
        self.gpu_queue: ClosableQueue[GpuItem] = ClosableQueue()
        self.counters = Counters()
        self.synth_active = 0  # status.rs synth_active: partition syntheses only
        self.buffers = {"synth": 0, "provers": 0, "aux": 0, "shells": 0, "pending": 0}
        self.max_partitions_in_budget = self.budget.total // PARTITION_BUDGET_UNIT
        self.synth_worker_count = max(
            2, min(self.max_partitions_in_budget, config.max_parallel_synthesis or DEFAULT_MAX_PARALLEL_SYNTHESIS)
        )
        devices = config.devices or list(range(config.engine.gpus))
        per_device = max(1, config.gpu_workers_per_device) if config.pipeline_enabled else 1
        self.devices = devices
        self.workers = [
            GpuWorker(i * per_device + sub, gpu) for i, gpu in enumerate(devices) for sub in range(per_device)
        ]
        self.gpu_locks = {gpu: asyncio.Lock() for gpu in devices}
        self.gpu_vram_used = dict.fromkeys(devices, 0)
        self._gpu_first_prove: set[int] = set()
        self._arrivals = itertools.count()
        self._job_seqs = itertools.count()
        # The dispatcher → synthesis worker channel, bounded at synth_worker_count like the daemon's.
        self._channel_slots = asyncio.Semaphore(self.synth_worker_count)
        self._handoff: ClosableQueue[tuple[Job, Partition, Reservation]] = ClosableQueue()
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._dispatcher: asyncio.Task[None] | None = None
        self.pacer = Pacer(self, config.max_gpu_queue_depth) if config.max_gpu_queue_depth > 0 else None
        self._hinted: set[str] = set()
        self.stopping = False

    # Start / stop -------------------------------------------------------------------------------

    def start(self) -> None:
        log, c = self.log, self.config
        log.info(tracing.ENGINE, msg.STARTING_ENGINE, ("pipeline_enabled", c.pipeline_enabled))
        log.start_epoch()
        log.info(tracing.ENGINE, msg.EVICTOR_WIRED)
        per_device = len(self.workers) // len(self.devices) if self.devices else max(1, c.gpu_workers_per_device)
        log.info(
            tracing.ENGINE,
            msg.INITIALIZING_GPU_WORKERS,
            ("num_gpus", len(self.devices)),
            ("gpu_workers_per_device", per_device),
            ("total_workers", len(self.workers)),
            ("gpus", "[" + ", ".join(str(d) for d in self.devices) + "]"),
        )
        if not c.pipeline_enabled:
            # engine.rs start(): each worker logs its start from inside its spawned task, so the
            # line comes after "cuzk engine started" and after the daemon's listen lines.
            for worker in self.workers:
                self._spawn(self._legacy_worker(worker))
            log.info(tracing.ENGINE, msg.ENGINE_STARTED, ("num_workers", len(self.workers)), ("pipeline", False))
            return
        if self.pacer is not None:
            log.info(tracing.ENGINE, msg.PACER_ENABLED, ("gpu_queue_target", self.pacer.target))
        log.info(tracing.ENGINE, msg.PRIORITY_DISPATCHER_STARTED)
        log.info(
            tracing.ENGINE,
            msg.PIPELINE_STARTING,
            ("configured_lookahead", c.synthesis_lookahead),
            ("max_partitions_in_budget", self.max_partitions_in_budget),
            ("effective_lookahead", max(c.synthesis_lookahead, min(self.max_partitions_in_budget, 32))),
            ("synth_worker_count", self.synth_worker_count),
            ("num_gpus", len(self.workers)),
        )
        log.info(
            tracing.ENGINE,
            msg.DISPATCHER_STARTED,
            ("max_batch_size", c.max_batch_size),
            ("max_batch_wait_ms", c.max_batch_wait_ms),
            ("slot_size", c.slot_size),
            ("synthesis_concurrency", c.synthesis_concurrency),
        )
        self._spawn(self._synthesis_dispatcher())
        self._dispatcher = self._spawn(self._dispatch())
        for sw_id in range(self.synth_worker_count):
            self._spawn(self._synth_worker(sw_id))
        log.info(
            tracing.ENGINE,
            msg.SPAWNING_GPU_WORKERS,
            ("gpu_workers_per_device", per_device),
        )
        for worker in self.workers:
            log.info(
                tracing.ENGINE,
                msg.PIPELINE_WORKER_STARTED,
                ("worker_id", worker.worker_id),
                ("gpu", worker.gpu),
                ("sub_id", worker.worker_id % per_device),
            )
            self._spawn(self._gpu_worker(worker))
        log.info(tracing.ENGINE, msg.ENGINE_STARTED, ("num_workers", len(self.workers)), ("pipeline", True))

    async def _evict(self, needed: int) -> int:
        """The budget's evictor: idle pinned buffers first, then idle SRS/PCE (docs/daemon-interface.md §6.5)."""
        freed = self.pinned.shrink(needed)
        if freed >= needed:
            return freed
        return freed + await self.residency.evict(needed - freed)

    def _spawn(self, coro: object) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.append(task)
        return task

    def _background_task(self, coro: object) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def shutdown(self) -> None:
        """SIGINT: workers stop taking work; work already running finishes; nothing else moves."""
        if self.stopping:
            return
        self.stopping = True
        log = self.log
        log.info(tracing.ENGINE, msg.SHUTTING_DOWN_ENGINE)
        self.scheduler.close()
        self.synth_queue.close()
        self._handoff.close()
        self.gpu_queue.close()
        if self._dispatcher is not None:
            self._dispatcher.cancel()  # it may be blocked on the budget; it holds no work
            log.info(tracing.ENGINE, msg.DISPATCHER_SHUTDOWN_SIGNAL)
            log.info(tracing.ENGINE, msg.DISPATCHER_STOPPED)
            log.info(tracing.ENGINE, msg.DISPATCHER_SHUTDOWN)

    async def aclose(self) -> None:
        """Cancels every task (tests and in-process benchmarks)."""
        for task in [*self._tasks, *self._background, *self.residency.extractions]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._background, *self.residency.extractions, return_exceptions=True)

    # Submission ---------------------------------------------------------------------------------

    def submit(self, request: ProofRequest) -> tuple[Job, int]:
        """SubmitProof (engine.rs ``Engine::submit``): registers a waiter nobody listens to (its
        receiver is dropped at once: the id becomes known to AwaitProof) and enqueues a new job,
        even when the same id is already in flight. Returns the job and its queue position."""
        job_id = request.request_id or str(uuid.uuid4())
        self.waiters.setdefault(job_id, []).append(asyncio.get_running_loop().create_future())
        return self._enqueue(request, job_id)

    def prove(self, request: ProofRequest) -> asyncio.Future[JobResult]:
        """Prove (engine.rs ``Engine::prove``): this caller's own waiter, then a new job under the
        id. A second Prove with an id in flight proves it again; the first completion answers every
        waiter of the id, later ones find none (upstream's behaviour for Curio's retries)."""
        job_id = request.request_id or str(uuid.uuid4())
        waiter: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(job_id, []).append(waiter)
        self._enqueue(request, job_id)
        return waiter

    def await_result(self, job_id: str) -> JobResult | asyncio.Future[JobResult] | None:
        """AwaitProof (engine.rs ``Engine::await_proof``): the kept result, else a new waiter if the
        id is pending, else None (job not found)."""
        result = self.results.get(job_id)
        if result is not None:
            return result
        waiters = self.waiters.get(job_id)
        if waiters is None:
            return None
        waiter: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
        waiters.append(waiter)
        return waiter

    def _enqueue(self, request: ProofRequest, job_id: str) -> tuple[Job, int]:
        future: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
        job = Job(request, job_id, next(self._arrivals), future)
        priority = request.effective_priority()
        # scheduler.rs Scheduler::submit: the position is the queue's length, whatever the priority.
        position = len(self.scheduler)
        self.scheduler.push((-priority, job.arrival), job)
        self.log.info(
            tracing.SCHEDULER,
            msg.JOB_ENQUEUED,
            ("job_id", job_id),
            ("proof_kind", job.facts.display),
            ("priority", PRIORITY_NAMES[priority]),
            ("queue_position", position),
        )
        return job, position

    def running_by_kind(self) -> dict[str, int]:
        """service.rs get_status: in-progress counts are the GPU workers' current jobs, nothing else
        (a job synthesising, or waiting for the GPU, is neither pending nor in progress)."""
        running: dict[str, int] = {}
        for worker in self.workers:
            if worker.job is not None:
                running[worker.kind] = running.get(worker.kind, 0) + 1
        return running

    def waiting_by_kind(self) -> dict[str, int]:
        waiting: dict[str, int] = {}
        for job in self.scheduler.items():
            waiting[job.facts.display] = waiting.get(job.facts.display, 0) + 1
        return waiting

    # Synthesis dispatcher ------------------------------------------------------------------------

    async def _synthesis_dispatcher(self) -> None:
        """engine.rs start(), "synthesis dispatcher": one loop pulling from the scheduler through
        batch_collector.rs's BatchCollector (one pending batch; a new batchable kind flushes the old
        batch, a non-batchable job pre-empts it, the wait runs from its first request), handing
        each batch to ``_process_batch`` inline (synthesis_concurrency 1) or as a task."""
        c = self.config
        slots = asyncio.Semaphore(max(1, c.synthesis_concurrency))
        pending: list[Job] = []
        pending_since = 0.0
        while True:
            if pending:
                left = pending_since + self.clock.real(c.max_batch_wait_ms / 1000) - time.monotonic()
                try:
                    job = await asyncio.wait_for(self.scheduler.get(), max(0.0, left))
                except TimeoutError:
                    await self._dispatch_batch(
                        pending, Span("synth_timeout_flush", (("batch_size", len(pending)),)), slots
                    )
                    pending = []
                    continue
            else:
                job = await self.scheduler.get()
            if job is None:
                if pending:
                    await self._dispatch_batch(pending, self._flush_span("synth_shutdown_flush", pending), slots)
                return
            self._dequeued(job)
            if job.request.kind in BATCHABLE and c.max_batch_size > 1:
                if pending and pending[0].request.kind is job.request.kind:
                    pending.append(job)
                    if len(pending) >= c.max_batch_size:
                        full, pending = pending, []
                        await self._dispatch_batch(full, self._batch_span("synth_batch_full", full), slots)
                    continue
                # BatchCollector::add: another kind replaces the pending batch, which is returned
                # and dispatched under the "batch full" span.
                flushed, pending, pending_since = pending, [job], time.monotonic()
                if flushed:
                    await self._dispatch_batch(flushed, self._batch_span("synth_batch_full", flushed), slots)
                continue
            if pending:
                flushed, pending = pending, []
                await self._dispatch_batch(flushed, self._batch_span("synth_preempt_flush", flushed), slots)
            await self._dispatch_batch([job], Span("synth_single", (("proof_kind", job.facts.display),)), slots)

    @staticmethod
    def _flush_span(name: str, batch: list[Job]) -> Span:
        return Span(name, (("batch_size", len(batch)),))

    @staticmethod
    def _batch_span(name: str, batch: list[Job]) -> Span:
        return Span(name, (("batch_size", len(batch)), ("proof_kind", batch[0].facts.display)))

    async def _dispatch_batch(self, batch: list[Job], span: Span, slots: asyncio.Semaphore) -> None:
        """engine.rs dispatch_batch: inline with concurrency 1, else a task holding a permit."""
        if self.config.synthesis_concurrency <= 1:
            await self._process_batch(batch, span)
            return
        await slots.acquire()

        async def run() -> None:
            try:
                await self._process_batch(batch, span)
            finally:
                slots.release()

        self._background_task(run())

    async def _process_batch(self, batch: list[Job], span: Span) -> None:
        facts = batch[0].facts
        self.log.info(
            tracing.ENGINE,
            msg.PROCESSING_BATCH,
            ("batch_size", len(batch)),
            ("proof_kind", facts.display),
            ("slot_size", self.config.slot_size),
            span=(span,),
        )
        try:
            if len(batch) > 1 or facts.monolithic:
                await self._monolithic(batch, span)
            else:
                await self._split(batch[0], span)
        except Exception as err:  # the emulator's own bug must fail the job, not kill the dispatcher
            for member in batch:
                self._fail(member, f"task panicked: {err}")

    def _dequeued(self, job: Job) -> None:
        display = job.facts.display
        self.log.info(tracing.SCHEDULER, msg.JOB_DEQUEUED, ("job_id", job.job_id), ("proof_kind", display))

    async def _parse(self, job: Job, path: inputs.Path) -> InputError | None:
        """Parses the input as the daemon does on ``path`` (:mod:`engine.inputs`); returns the
        failure (upstream's context text) or None. The payload is dropped once parsed: like upstream,
        which keeps only a finished job's status, the engine keeps only what the self-check needs."""
        request = job.request
        size = len(request.vanilla_proof) + sum(len(p) for p in request.vanilla_proofs)
        await self.clock.sleep(timemodel.C1_PARSE_S * min(1.0, size / 51e6))
        job.digest = await asyncio.to_thread(request.digest)
        try:
            job.parsed = await asyncio.to_thread(inputs.check, request, path)
            if job.parsed.vanilla_partitions is not None:
                job.vanilla_partitions = job.parsed.vanilla_partitions
        except InputError as err:
            return err
        finally:
            # The count stays (lines report it), the bytes go.
            request.vanilla_proof, request.vanilla_proofs = b"", [b""] * len(request.vanilla_proofs)
        return None

    async def _split(self, job: Job, span: Span) -> None:
        facts = job.facts
        error = await self._parse(job, inputs.Path.PARTITIONED)
        if error is not None:
            # engine.rs: the per-partition dispatch of PoRep / SnapDeals.
            porep = facts.kind is ProofKind.POREP_SEAL_COMMIT
            what = msg.C1_PARSE_FAILED if porep else msg.SNAP_PARSE_FAILED
            self.log.error(tracing.ENGINE, what, ("error", str(error)), span=(span,))
            self._fail(job, f"{'C1' if porep else 'SnapDeals'} parse failed: {error}")
            return
        await self.residency.acquire_srs(facts.circuit_id)
        job.holds_srs = True
        job.split_at = time.monotonic()
        snap = facts.kind is ProofKind.SNAP_DEALS_UPDATE
        # engine.rs process_batch: register with the status tracker and the assembler (both keyed
        # by job id: a second job under the same id replaces the first's entries), log the
        # dispatch, start PCE extraction, then take the sequence number and queue the partitions.
        job.partitions = [Partition(i) for i in range(facts.partitions)]
        self.pipelines[job.job_id] = job
        self.assemblers[job.job_id] = Assembler(job, [None] * facts.partitions)
        self.log.info(
            tracing.ENGINE,
            msg.DISPATCHING_SNAP_PARTITIONS if snap else msg.DISPATCHING_PARTITIONS,
            ("job_id", job.job_id),
            ("num_partitions", facts.partitions),
            ("budget_available_gib", gib(self.budget.available)),
            span=(span,),
        )
        self.residency.start_extraction(facts)
        job.job_seq = next(self._job_seqs)
        self.log.info(
            tracing.ENGINE,
            msg.ASSIGNED_SNAP_SEQUENCE if snap else msg.ASSIGNED_SEQUENCE,
            ("job_id", job.job_id),
            ("job_seq", job.job_seq),
            span=(span,),
        )
        for part in job.partitions:
            self.synth_queue.push((job.job_seq, part.index), (job, part))

    # Dispatcher and synthesis ---------------------------------------------------------------------

    async def _dispatch(self) -> None:
        while True:
            entry = await self.synth_queue.get()
            if entry is None:
                return
            job, part = entry
            # Reserve first, then send into the bounded channel (blocking while it is full): the
            # reservation is held while the partition waits for a worker, its memory is not.
            reservation = await self.budget.acquire(job.facts.full_reservation)
            # engine.rs dispatcher: the failed check comes after the budget was granted.
            if self._assembly_failed(job):
                self.log.info(
                    tracing.ENGINE,
                    msg.SKIPPING_SYNTHESIS_FAILED,
                    ("job_id", job.job_id),
                    ("partition", part.index),
                )
                reservation.release()
                continue
            try:
                if self.pacer is not None:
                    await self.pacer.before_dispatch()
                await self._channel_slots.acquire()
            except asyncio.CancelledError:
                reservation.release()
                raise
            self._handoff.push(0, (job, part, reservation))

    def _assembly_failed(self, job: Job) -> bool:
        assembler = self.assemblers.get(job.job_id)
        return assembler is not None and assembler.failed

    def _status_partition(self, job: Job, index: int) -> Partition | None:
        """The /status entry of a partition: status.rs looks jobs up by id, so with two jobs under
        one id the later registration receives both jobs' updates."""
        shown = self.pipelines.get(job.job_id)
        return None if shown is None or index >= len(shown.partitions) else shown.partitions[index]

    @property
    def channel_waiting(self) -> int:
        """Partitions reserved and handed off, waiting for a synthesis worker."""
        return len(self._handoff)

    async def _synth_worker(self, sw_id: int) -> None:
        while True:
            entry = await self._handoff.get()
            if entry is None:
                self.log.info(tracing.ENGINE, msg.SYNTH_WORKER_SHUTDOWN, ("sw_id", sw_id))
                return
            self._channel_slots.release()
            await self._synthesize(*entry)

    def _jittered(self, seconds: float) -> float:
        return seconds * (1 + self.rng.uniform(-timemodel.JITTER, timemodel.JITTER))

    async def _grow_synthesis(self, seconds: float, shape: RssShape, circuits: int) -> tuple[list[Block], list[Block]]:
        """Runs ``circuits`` syntheses of ``seconds`` (jittered) side by side while their a/b/c and
        aux memory grows with the progress: each of ``GROWTH_STEPS`` steps maps its share at the
        start of its share of the work (so the mapping overlaps the modelled time, and the model
        never lags the real growth by more than one step). Returns the (abc, aux) blocks."""
        work = self._jittered(seconds) / GROWTH_STEPS
        abc: list[Block] = []
        aux: list[Block] = []
        for step in range(GROWTH_STEPS):
            last = step == GROWTH_STEPS - 1
            sizes = [
                total - (GROWTH_STEPS - 1) * (total // GROWTH_STEPS) if last else total // GROWTH_STEPS
                for total in (shape.abc * circuits, shape.aux * circuits)
            ]
            mapping = asyncio.gather(*(self.arena.alloc(size) for size in sizes))
            await asyncio.gather(*(self.pool.run(work) for _ in range(circuits)))
            abc_block, aux_block = await mapping
            abc.append(abc_block)
            aux.append(aux_block)
        return abc, aux

    async def _synthesize(self, job: Job, part: Partition, reservation: Reservation) -> None:
        facts = job.facts
        p = part.index
        synth_started = time.monotonic()
        shown = self._status_partition(job, p)  # status.rs partition_synth_start
        if shown is not None:
            shown.state, shown.synth_started = PartState.SYNTHESIZING, synth_started
        self.synth_active += 1
        self.buffers["synth"] += 1
        self.log.timeline("SYNTH_START", job.job_id, f"partition={p}")
        if job.vanilla_partitions is not None and p >= job.vanilla_partitions:
            # pipeline.rs build_partition_circuit_from_parsed: the input has no proof for it.
            self._partition_failed(job, p, f"partition {p} >= vanilla_proofs.len() {job.vanilla_partitions}")
            reservation.release()
            return
        span = (
            Span(
                "synthesize_snap_deals_partition"
                if facts.kind is ProofKind.SNAP_DEALS_UPDATE
                else "synthesize_partition",
                (("job_id", Quoted(job.job_id)), ("partition", p)),
            ),
        )
        self.log.info(
            tracing.PIPELINE,
            msg.STANDARD_SYNTHESIS_PATH,
            ("circuit_id", facts.circuit_id),
            span=span,
        )
        if facts.circuit_id in self._hinted:
            self.log.info(
                tracing.PIPELINE,
                msg.CACHED_HINT,
                ("circuit_id", facts.circuit_id),
                span=span,
            )
        else:
            self.log.info(
                tracing.PIPELINE,
                msg.NO_HINT,
                ("circuit_id", facts.circuit_id),
                span=span,
            )
        constraints = CONSTRAINTS[facts.kind]
        shape = RssShape.of(facts)
        pinned: list[PinnedBuffer] = []
        if facts.circuit_id in self._hinted:
            pinned = await self._checkout_pinned(facts.circuit_id, constraints, span)
            if pinned:
                # a/b/c live in the pinned buffers; the heap grows by the aux and the small rest.
                shape = RssShape(max(0, shape.abc - sum(buf.size for buf in pinned)), shape.aux)
        started = time.monotonic()
        abc, aux = await self._grow_synthesis(timemodel.SYNTH_S[facts.kind], shape, 1)
        elapsed = time.monotonic() - started
        self.synth_active -= 1
        self.buffers["synth"] -= 1
        self.buffers["provers"] += 1
        self.buffers["aux"] += 1
        self.buffers["shells"] += 1
        shown = self._status_partition(job, p)  # status.rs partition_synth_end
        if shown is not None:
            shown.state, shown.synth_ms = PartState.SYNTH_DONE, ms_since(synth_started)
        self.log.info(tracing.BELLPERSON, msg.SYNTHESIS_TIME_PREFIX + rust_duration(elapsed), span=span)
        self.log.info(tracing.BELLPERSON, msg.STARTING_PROOF_TIMER, span=span)
        self._hinted.add(facts.circuit_id)
        self.log.info(
            tracing.PIPELINE,
            msg.HINT_CACHED,
            ("circuit_id", facts.circuit_id),
            ("num_constraints", constraints),
            ("num_aux", constraints // 5 * 4),
            ("num_inputs", 328),
            span=span,
        )
        synth_ms = ms_since(synth_started)
        if self.pacer is not None:
            self.pacer.synth_done(synth_ms)
        part.synth_ms = synth_ms
        self.log.info(
            tracing.PIPELINE,
            msg.SNAP_PARTITION_SYNTH_COMPLETE
            if facts.kind is ProofKind.SNAP_DEALS_UPDATE
            else msg.PARTITION_SYNTH_COMPLETE,
            ("partition", p),
            ("synth_ms", synth_ms),
            ("is_pinned", bool(pinned)),
            span=span,
        )
        self.log.timeline("SYNTH_END", job.job_id, f"partition={p},synth_ms={synth_ms}")
        self.log.info(
            tracing.ENGINE,
            msg.PARTITION_TO_GPU_QUEUE,
            ("job_id", job.job_id),
            ("partition", p),
            ("synth_ms", synth_ms),
        )
        self.log.timeline("GPU_QUEUE", job.job_id, f"partition={p}")
        item = GpuItem([job], facts, p, 1, reservation, abc, aux, synth_ms, pinned=pinned)
        assert job.job_seq is not None
        self._queue_for_gpu((job.job_seq, p), item)

    def _queue_for_gpu(self, key: tuple[int, int], item: GpuItem) -> None:
        """engine.rs ``gpu_work_queue.push``: an item queued at the same key is dropped silently,
        its memory freed, its callers never answered (the daemon's bug, reproduced)."""
        dropped = self.gpu_queue.put(key, item)
        if dropped is not None:
            self._drop_item(dropped)
            if dropped.partition is None:
                for job in dropped.jobs:
                    self._release_srs(job)

    def _partition_failed(self, job: Job, p: int, error: str) -> None:
        """engine.rs synthesis worker, ``Ok(Err(e))`` branch, with status.rs's leaks: the partition
        shows "failed", ``synthesis.active`` (and the synth buffer count) is never lowered, and the
        job is never reported completed to the tracker, so it stays in /status ``pipelines``."""
        shown = self._status_partition(job, p)  # status.rs partition_failed
        if shown is not None:
            shown.state = PartState.FAILED
        self.log.error(
            tracing.ENGINE, msg.PARTITION_SYNTH_FAILED, ("error", error), ("job_id", job.job_id), ("partition", p)
        )
        assembler = self.assemblers.get(job.job_id)
        if assembler is not None and not assembler.failed:
            assembler.failed = True
            self._fail(job, f"partition {p} synthesis failed: {error}")

    async def _checkout_pinned(self, circuit_id: str, constraints: int, span: tuple[Span, ...]) -> list[PinnedBuffer]:
        """Three pinned a/b/c buffers for a hinted partition synthesis; [] = unpinned fallback."""
        buf_bytes = constraints * SCALAR_SIZE
        self.log.info(
            tracing.PIPELINE,
            msg.ATTEMPTING_PINNED,
            ("circuit_id", circuit_id),
            ("num_constraints", constraints),
            ("scalar_size", SCALAR_SIZE),
            ("buf_gib", buf_bytes / GiB),
            span=span,
        )
        buffers = await self.pinned.checkout_abc(constraints)
        if buffers is None:
            self.log.warn(
                tracing.PIPELINE,
                msg.PINNED_CHECKOUT_FAILED,
                ("num_constraints", constraints),
                ("pool_free", len(self.pinned.free)),
                ("pool_total_gib", self.pinned.total_bytes / GiB),
                span=span,
            )
            return []
        self.log.info(tracing.PIPELINE, msg.PINNED_PROVER_CREATED)
        return buffers

    async def _monolithic(self, batch: list[Job], span: Span) -> None:
        """Whole-proof synthesis by the batch task: PoSt, or a multi-sector PoRep/SnapDeals batch."""
        first = batch[0]
        facts = first.facts
        multi = len(batch) > 1 and facts.kind is ProofKind.POREP_SEAL_COMMIT
        path = inputs.Path.BATCH if multi else inputs.Path.SYNTHESIS
        errors = [await self._parse(job, path) for job in batch]
        # A multi-sector PoRep batch parses every sector, any other batch only its first request;
        # one synthesis call for the whole batch: its failure fails every request in it.
        error = next((e for e in errors if e is not None), None) if multi else errors[0]
        if error is not None:
            if isinstance(error, inputs.Panic):
                self.log.error(
                    tracing.ENGINE, msg.SYNTHESIS_TASK_PANICKED, ("error", error.join_error(first.arrival + 1))
                )
                text = f"synthesis panicked: {error.join_error(first.arrival + 1)}"
            else:
                self.log.error(tracing.ENGINE, msg.SYNTHESIS_FAILED, ("error", str(error)), span=(span,))
                text = f"synthesis failed: {error}"
            for job in batch:
                self._fail(job, text)
            return
        porep_batch = len(batch) > 1 and facts.kind is ProofKind.POREP_SEAL_COMMIT
        # engine.rs process_batch: only a multi-sector PoRep batch synthesises every sector (and
        # reserves the batch figure); any other kind synthesises its first request alone.
        circuits = facts.partitions * (len(batch) if porep_batch else 1)
        reservation = await self.budget.acquire(BATCH_RESERVATION if porep_batch else facts.full_reservation)
        started = time.monotonic()
        # engine.rs process_batch: TIMELINE names the batch's first request only (SYNTH_START,
        # SYNTH_END, GPU_QUEUE here; GPU_PICKUP, GPU_START, GPU_END in the GPU worker).
        self.log.timeline("SYNTH_START", first.job_id, f"kind={facts.display}")
        lines = mono_synthesis_lines(batch, circuits)
        # pipeline.rs synthesize_*: run on a blocking thread, so only their own span, not the batch's.
        for message, fields in lines.before:
            self.log.info(tracing.PIPELINE, message, *fields, span=(lines.span,))
        # Not counted in /status synthesis.active: status.rs only hears of partition syntheses.
        abc, aux = await self._grow_synthesis(timemodel.SYNTH_S[facts.kind], RssShape.of(facts), circuits)
        synth_ms = ms_since(started)
        self.log.info(tracing.PIPELINE, lines.done, ("synth_ms", synth_ms), *lines.done_fields, span=(lines.span,))
        for job in batch:
            await self.residency.acquire_srs(facts.circuit_id)
            job.holds_srs = True
        self.log.timeline("SYNTH_END", first.job_id, f"synth_ms={synth_ms}")
        self.residency.start_extraction(facts)
        self.log.info(
            tracing.ENGINE,
            msg.SYNTHESIS_COMPLETE_TO_GPU,
            ("synth_ms", synth_ms),
            ("circuit_id", facts.circuit_id),
            ("batch_size", len(batch)),
            ("sectors", len(batch)),
            span=(span,),
        )
        self.log.timeline("GPU_QUEUE", first.job_id, "monolithic")
        item = GpuItem(batch, facts, None, circuits, reservation, abc, aux, synth_ms, started)
        self._queue_for_gpu((0, 0), item)  # engine.rs: "monolithic jobs get job_seq=0"

    # GPU ------------------------------------------------------------------------------------------

    async def _gpu_worker(self, worker: GpuWorker) -> None:
        while True:
            item = await self.gpu_queue.get()
            if item is None:
                self.log.info(tracing.ENGINE, msg.PIPELINE_WORKER_SHUTDOWN, ("worker_id", worker.worker_id))
                self.log.info(tracing.ENGINE, msg.PIPELINE_WORKER_STOPPED, ("worker_id", worker.worker_id))
                return
            await self._prove(worker, item)

    async def _prove(self, worker: GpuWorker, item: GpuItem) -> None:
        w, p = worker.worker_id, item.partition
        job = item.jobs[0]
        part_detail = "" if p is None else f",partition={p}"
        picked = time.monotonic()
        if p is not None:  # status.rs partition_gpu_start: partitions only
            shown = self._status_partition(job, p)
            if shown is not None:
                shown.state, shown.gpu_started = PartState.GPU, picked
            worker.status_job, worker.partition, worker.busy_since = job.job_id, p, picked
        self.log.timeline("GPU_PICKUP", job.job_id, f"worker={w}{part_detail}")
        if p is not None and self._assembly_failed(job):
            # engine.rs GPU worker: skipped before the worker is marked busy; /status keeps showing
            # the worker on this partition (nothing calls partition_gpu_end for it).
            self.log.info(
                tracing.ENGINE,
                msg.SKIPPING_GPU_FAILED,
                ("job_id", job.job_id),
                ("partition", option(p)),
            )
            self._drop_item(item)
            return
        worker.job, worker.kind = job, job.facts.display
        span = (
            Span(
                "gpu_worker",
                (
                    ("worker_id", w),
                    ("gpu", worker.gpu),
                    ("job_id", job.job_id),
                    ("proof_kind", job.facts.display),
                    ("batch_size", len(item.jobs)),
                    ("partition", option(p)),
                ),
            ),
        )
        self.log.info(
            tracing.ENGINE,
            msg.GPU_TIMING_HOT_PATH,
            ("worker_id", w),
            ("partition", option(p)),
            ("status_ms", 0),
            ("fail_check_ms", 0),
            ("mark_busy_ms", 0),
            ("total_overhead_ms", 0),
            span=span,
        )
        self.log.timeline("GPU_START", job.job_id, f"worker={w}{part_detail}")
        self.buffers["pending"] += 1
        prove_started = time.monotonic()
        kernel_s = timemodel.GPU_MUTEX_S[item.facts.kind] * item.circuits
        await self.clock.sleep(kernel_s * timemodel.GPU_PRE_LOCK_FRACTION)
        pre_lock_ms = ms_since(prove_started)
        self.log.cuzk_timing(f"split_vectors_ms={pre_lock_ms // 2} setup_to_split_ms={pre_lock_ms - pre_lock_ms // 2}")
        lock = self.gpu_locks[worker.gpu]
        wait_started = time.monotonic()
        async with lock:
            held_started = time.monotonic()
            self.log.cuzk_timing(f"pre_lock_cpu_ms={pre_lock_ms} mutex_wait_ms={ms_since(wait_started)}")
            if worker.gpu not in self._gpu_first_prove:
                self._gpu_first_prove.add(worker.gpu)
                self.gpu_vram_used[worker.gpu] += D_A_CACHE
                self.log.cuzk_timing(f"set pool release threshold to MAX on gpu {worker.gpu}")
                self.log.cuzk_timing(f"d_a_cache allocated {D_A_CACHE >> 20} MiB on gpu {worker.gpu}")
            self.gpu_vram_used[worker.gpu] += PROVE_VRAM
            await self.clock.sleep(kernel_s)
            self.gpu_vram_used[worker.gpu] -= PROVE_VRAM
            gpu_total = ms_since(held_started)
            self.log.cuzk_timing(f"prep_msm_ms={gpu_total * 45 // 100}")
            ntt_msm_h_ms = gpu_total * 6 // 10
            for _ in range(item.circuits):  # groth16_ntt_h.cu execute_ntt_msm_h: one line per circuit
                self.log.ntt_h(ntt_msm_h_ms // item.circuits)
            self.log.cuzk_timing(f"gpu_tid=0 ntt_msm_h_ms={ntt_msm_h_ms}")
            self.log.cuzk_timing("gpu_tid=0 barrier_wait_ms=0")
            self.log.cuzk_timing(f"gpu_tid=0 batch_add_ms={gpu_total // 10}")
            self.log.cuzk_timing(f"gpu_tid=0 tail_msm_ms={gpu_total - gpu_total * 7 // 10} gpu_total_ms={gpu_total}")
        prove_start_ms = ms_since(prove_started)
        self.log.cuzk_timing(f"mutex_held_ms={ms_since(held_started)} total_start_fn_ms={prove_start_ms}")
        for block in item.abc:
            block.free()
        self._checkin(item)
        item.reservation.release(item.facts.abc_release)
        self.buffers["provers"] -= 1
        if self.pacer is not None:
            self.pacer.gpu_done(ms_since(held_started))
        self.log.info(
            tracing.ENGINE,
            msg.GPU_TIMING_SPAWN,
            ("worker_id", w),
            ("partition", option(p)),
            ("spawn_to_enter_ms", 0),
            ("prove_start_ms", prove_start_ms),
        )
        self.log.info(
            tracing.ENGINE,
            msg.GPU_TIMING_RETURNED,
            ("worker_id", w),
            ("partition", option(p)),
            ("total_pre_prove_ms", ms_since(picked)),
            ("spawn_blocking_wall_ms", prove_start_ms),
            span=span,
        )
        self._background_task(self._finalize(worker, item, prove_started, kernel_s))

    def _checkin(self, item: GpuItem) -> None:
        """The prove-start call has freed a/b/c: pinned buffers go back to the pool (still resident)."""
        for buf in item.pinned:
            self.pinned.checkin(buf)
        item.pinned = []

    def _drop_item(self, item: GpuItem) -> None:
        for block in (*item.abc, *item.aux):
            block.free()
        self._checkin(item)
        item.reservation.release()

    async def _finalize(self, worker: GpuWorker, item: GpuItem, prove_started: float, kernel_s: float) -> None:
        w, p = worker.worker_id, item.partition
        b_g2_started = time.monotonic()
        await self.clock.sleep(kernel_s * timemodel.B_G2_MSM_FRACTION)
        self.log.cuzk_timing(f"b_g2_msm_ms={ms_since(b_g2_started)} num_circuits={item.circuits}")
        gpu_ms = ms_since(prove_started)
        detail = f"worker={w},gpu_ms={gpu_ms}" if p is None else f"worker={w},partition={p},gpu_ms={gpu_ms}"
        if p is None and item.facts.kind is ProofKind.WINDOW_POST_PARTITION:
            detail = f"worker={w},partition={item.jobs[0].request.partition_index},gpu_ms={gpu_ms}"
        self.log.timeline("GPU_END", item.jobs[0].job_id, detail)
        proof_bytes = item.facts.proof_bytes_per_partition * item.circuits
        self.log.info(
            tracing.PIPELINE,
            msg.GPU_PROVE_COMPLETE_SPLIT,
            ("proof_count", item.circuits),
            ("proof_bytes", proof_bytes),
            ("gpu_ms", gpu_ms),
        )
        finish_started = time.monotonic()
        await self.clock.sleep(timemodel.FINALIZE_PROCESS_S)
        process_ms = ms_since(finish_started)
        for block in item.aux:
            block.free()
        item.reservation.release()
        self.buffers["pending"] -= 1
        # engine.rs finalizer: clears the worker's current job even if it has moved on to another.
        worker.job, worker.kind = None, ""
        if p is None:
            self._finish_monolithic(item, gpu_ms, w, process_ms)
            return
        job = item.jobs[0]
        self._partition_result(worker, job, p, item.synth_ms, gpu_ms)
        self.log.info(
            tracing.ENGINE,
            msg.FIN_TIMING_PARTITION,
            ("worker_id", w),
            ("partition", option(p)),
            ("finish_ms", process_ms),
            ("drop_res_ms", 0),
            ("lock_wait_ms", 0),
            ("process_ms", process_ms),
            ("total_ms", process_ms),
        )

    def _partition_result(self, worker: GpuWorker, job: Job, p: int, synth_ms: int, gpu_ms: int) -> None:
        """engine.rs ``process_partition_result``: routed by job id to whatever assembler holds it."""
        shown = self._status_partition(job, p)  # status.rs partition_gpu_end
        if shown is not None:
            shown.state, shown.gpu_ms = PartState.DONE, gpu_ms
        if worker.status_job == job.job_id and worker.partition == p:
            worker.status_job, worker.partition, worker.busy_since = None, None, None
        assembler = self.assemblers.get(job.job_id)
        if assembler is None:
            self.log.warn(
                tracing.ENGINE,
                msg.ASSEMBLER_NOT_FOUND,
                ("job_id", job.job_id),
                ("partition", p),
            )
            return
        if assembler.failed:
            self.log.info(tracing.ENGINE, msg.DISCARDING_FAILED_RESULT, ("job_id", job.job_id), ("partition", p))
            self.log.info(
                tracing.ENGINE,
                msg.FIN_TIMING_TRIM_DISCARD,
                ("job_id", job.job_id),
                ("partition", p),
                ("malloc_trim_ms", 0),
            )
            return
        assembler.proofs[p] = partition_proof(job.digest, p)
        assembler.gpu_ms += gpu_ms
        assembler.synth_ms += synth_ms
        self.log.info(
            tracing.ENGINE,
            msg.PARTITION_GPU_COMPLETE,
            ("job_id", job.job_id),
            ("partition", p),
            ("gpu_ms", gpu_ms),
            ("filled", int(assembler.complete)),
        )
        self.log.info(
            tracing.ENGINE,
            msg.FIN_TIMING_TRIM_SUCCESS,
            ("job_id", job.job_id),
            ("partition", p),
            ("malloc_trim_ms", 0),
        )
        if assembler.complete:
            del self.assemblers[job.job_id]
            self._finish_partitioned(assembler)

    def _finish_partitioned(self, assembler: Assembler) -> None:
        job = assembler.job
        proof = b"".join(part for part in assembler.proofs if part is not None)
        total_ms = ms_since(job.submitted)
        queue_ms = max(0, total_ms - ms_since(assembler.started))
        # Logged before any self-check (engine.rs process_partition_result).
        self.log.info(
            tracing.ENGINE,
            msg.PROOF_ASSEMBLED,
            ("job_id", job.job_id),
            ("proof_len", len(proof)),
            ("total_ms", total_ms),
            ("synth_ms", assembler.synth_ms),
            ("gpu_ms", assembler.gpu_ms),
        )
        c1 = job.parsed.c1 if job.parsed is not None else None
        if c1 is not None:
            failure = inputs.self_check(self.log, inputs.CheckSite.PARTITIONED, job.job_id, c1, job.request, len(proof))
            if failure is not None:
                self._status_job_completed(job, success=False)
                self._fail(job, failure)
                return
        self._status_job_completed(job, success=True)
        self._complete(
            job, JobResult(Status.COMPLETED, proof, "", queue_ms, assembler.synth_ms, assembler.gpu_ms, total_ms)
        )

    def _status_job_completed(self, job: Job, *, success: bool) -> None:
        """status.rs ``job_completed``: only the partitioned path calls it (success, or a failed
        self-check); a job failed any other way stays in /status ``pipelines`` for good."""
        display = job.facts.display
        c = self.counters
        if success:
            c.status_completed += 1
            c.status_completed_by_kind[display] = c.status_completed_by_kind.get(display, 0) + 1
        else:
            c.status_failed += 1
            c.status_failed_by_kind[display] = c.status_failed_by_kind.get(display, 0) + 1
        shown = self.pipelines.get(job.job_id)
        if shown is not None:
            shown.completed_at = time.monotonic()

    def _finish_monolithic(self, item: GpuItem, gpu_ms: int, worker_id: int, process_ms: int) -> None:
        self.log.info(
            tracing.ENGINE,
            msg.FIN_TIMING_MONOLITHIC,
            ("worker_id", worker_id),
            ("finish_ms", process_ms),
            ("drop_res_ms", 0),
            ("lock_wait_ms", 0),
            ("process_ms", process_ms),
            ("total_ms", process_ms),
        )
        if len(item.jobs) > 1 and item.facts.kind is not ProofKind.POREP_SEAL_COMMIT:
            # engine.rs: a non-PoRep batch proved its first request only and has no sector
            # boundaries, so pipeline.rs split_batched_proofs refuses the bytes: all fail.
            error = (
                f"proof bytes length mismatch: got {item.facts.proof_bytes_per_partition * item.circuits}, "
                f"expected 0 (0 partitions × {item.facts.proof_bytes_per_partition} bytes)"
            )
            self.log.error(tracing.ENGINE, msg.SPLIT_BATCH_FAILED, ("error", error))
            for job in item.jobs:
                self._fail(job, f"proof split failed: {error}")
            return
        per_job = item.circuits // len(item.jobs)
        proofs = [b"".join(partition_proof(job.digest, i) for i in range(per_job)) for job in item.jobs]
        if len(item.jobs) > 1:
            # engine.rs process_monolithic_result, batched branch: one line for the batch, one per
            # sector, and no "proof completed successfully (pipeline)".
            self.log.info(
                tracing.ENGINE,
                msg.BATCH_SPLITTING,
                ("total_proof_bytes", sum(len(proof) for proof in proofs)),
                ("num_sectors", len(item.jobs)),
                ("synth_ms", item.synth_ms),
                ("gpu_ms", gpu_ms),
            )
        for index, (job, proof) in enumerate(zip(item.jobs, proofs, strict=True)):
            total_ms = ms_since(job.submitted)
            queue_ms = max(0, total_ms - item.synth_ms - gpu_ms)
            c1 = job.parsed.c1 if job.parsed is not None else None
            if len(item.jobs) > 1:
                self.log.info(
                    tracing.ENGINE,
                    msg.BATCH_SECTOR_DELIVERED,
                    ("sector_idx", index),
                    ("job_id", job.job_id),
                    ("proof_len", len(proof)),
                    ("total_ms", total_ms),
                )
                if c1 is not None:
                    failure = inputs.self_check(
                        self.log, inputs.CheckSite.BATCHED, job.job_id, c1, job.request, len(proof), index
                    )
                    if failure is not None:
                        self._fail(job, failure)
                        continue
                self._complete(job, JobResult(Status.COMPLETED, proof, "", queue_ms, item.synth_ms, gpu_ms, total_ms))
                continue
            self.log.info(
                tracing.ENGINE,
                msg.PROOF_COMPLETED_PIPELINE,
                ("proof_len", len(proof)),
                ("total_ms", total_ms),
                ("queue_ms", queue_ms),
                ("synth_ms", item.synth_ms),
                ("gpu_ms", gpu_ms),
            )
            if c1 is not None and len(item.jobs) == 1:
                failure = inputs.self_check(self.log, inputs.CheckSite.SINGLE, job.job_id, c1, job.request, len(proof))
                if failure is not None:
                    self._fail(job, failure)
                    continue
            self._complete(job, JobResult(Status.COMPLETED, proof, "", queue_ms, item.synth_ms, gpu_ms, total_ms))

    def _release_srs(self, job: Job) -> None:
        """The job's SRS reference goes once its work is over, whatever the outcome (upstream's
        work items hold an Arc of the SRS and drop it with themselves), so the SRS can be evicted."""
        if job.holds_srs:
            job.holds_srs = False
            self.residency.release_srs(job.facts.circuit_id)

    def _complete(self, job: Job, result: JobResult) -> None:
        self._release_srs(job)
        display = job.facts.display
        c = self.counters
        if result.status is Status.COMPLETED:
            c.completed += 1
            c.completed_by_kind[display] = c.completed_by_kind.get(display, 0) + 1
            window = c.durations.setdefault(display, deque(maxlen=DURATION_WINDOW))
            window.append(result.total_ms / 1000)
        else:
            c.failed += 1
            c.failed_by_kind[display] = c.failed_by_kind.get(display, 0) + 1
        if not job.future.done():
            job.future.set_result(result)
        # engine.rs: every waiter of the id gets the result (a gone waiter is skipped), and the
        # result is kept for a later AwaitProof; a second job under the id finds no waiters.
        for waiter in self.waiters.pop(job.job_id, []):
            if not waiter.done():
                waiter.set_result(result)
        self.results[job.job_id] = result

    def _fail(self, job: Job, error: str) -> None:
        if job.failed:
            return
        job.failed = True
        self._complete(job, JobResult(Status.FAILED, error=error))

    # Legacy (pipeline.enabled = false) ---------------------------------------------------------------

    async def _legacy_worker(self, worker: GpuWorker) -> None:
        """engine.rs start(), monolithic workers: one whole proof at a time per GPU, straight from
        the scheduler: no TIMELINE, no partitions, no /status entries, SRS outside the budget."""
        w = worker.worker_id
        self.log.info(tracing.ENGINE, msg.MONO_WORKER_STARTED, ("worker_id", w), ("gpu", worker.gpu))
        while True:
            job = await self.scheduler.get()
            if job is None:
                self.log.info(tracing.ENGINE, msg.MONO_WORKER_SHUTDOWN, ("worker_id", w))
                break
            self._dequeued(job)
            span = Span(
                "monolithic_worker",
                (("worker_id", w), ("gpu", worker.gpu), ("job_id", job.job_id), ("proof_kind", job.facts.display)),
            )
            self.log.info(tracing.ENGINE, msg.PROCESSING_MONOLITHIC, span=(span,))
            worker.job, worker.kind = job, job.facts.display
            prover = prover_lines(job.request, job.job_id)  # read from the payload, which the parse drops
            error = await self._parse(job, inputs.Path.MONOLITHIC)
            prove_ms = 0
            if error is None:
                started = time.monotonic()
                facts = job.facts
                for message, fields in prover.before:
                    self.log.info(tracing.PROVER, message, *fields, span=(prover.span,))
                seconds = facts.partitions * (timemodel.SYNTH_S[facts.kind] + timemodel.GPU_MUTEX_S[facts.kind])
                await self.clock.sleep(self._jittered(seconds))
                prove_ms = ms_since(started)
                proof = b"".join(partition_proof(job.digest, i) for i in range(facts.partitions))
                c1 = job.parsed.c1 if job.parsed is not None else None
                if c1 is not None and not inputs.self_check_passes(c1, job.request):
                    # seal_commit_phase2 verifies its own proof and fails when it does not verify.
                    error = InputError(inputs.MONOLITHIC_CALL[ProofKind.POREP_SEAL_COMMIT])
                else:
                    self.log.info(
                        tracing.PROVER,
                        prover.done,
                        ("proof_len", len(proof)),
                        *prover.done_fields(prove_ms),
                        span=(prover.span,),
                    )
            total_ms = ms_since(job.submitted)
            # engine.rs: the worker's current job is cleared before the result is recorded.
            worker.job, worker.kind = None, ""
            if error is not None:
                self.log.error(tracing.ENGINE, msg.PROOF_FAILED, ("error", str(error)), span=(span,))
                self._fail(job, str(error))
                continue
            self.log.info(
                tracing.ENGINE,
                msg.PROOF_COMPLETED_MONOLITHIC,
                ("proof_len", len(proof)),
                ("total_ms", total_ms),
                ("queue_ms", total_ms - prove_ms),
                ("deser_ms", 0),
                ("prove_ms", prove_ms),
                span=(span,),
            )
            self._complete(job, JobResult(Status.COMPLETED, proof, "", total_ms - prove_ms, 0, prove_ms, total_ms))
        self.log.info(tracing.ENGINE, msg.MONO_WORKER_STOPPED, ("worker_id", w))

    # Views --------------------------------------------------------------------------------------------

    def uptime(self) -> float:
        return time.monotonic() - self.created

    def prune_pipelines(self) -> None:
        now = time.monotonic()
        for job_id, job in list(self.pipelines.items()):
            # status.rs snapshot: only jobs it was told completed age out; failed ones stay forever.
            if job.completed_at is not None and now - job.completed_at >= COMPLETED_RETENTION_S:
                del self.pipelines[job_id]


class Pacer:
    """A PI pacer that spaces out synthesis dispatch to keep about ``target`` synthesized
    partitions waiting for the GPU (``max_gpu_queue_depth``; docs/daemon-interface.md §3.10, §4.6 pacer lines)."""

    KP: Final = 0.5
    KI: Final = 0.05

    def __init__(self, engine: Engine, target: int) -> None:
        self.engine = engine
        self.target = target
        self.bootstrap = True
        self.bootstrap_dispatched = 0
        self.rebootstraps = 0
        self.dispatches = 0
        self.gpu_proc_ms: float | None = None
        self.ema_waiting = 0.0
        self.ema_synth_ms = 0.0
        self.integral = 0.0
        self.interval_ms = 0.0
        self.last_dispatch = 0.0
        self._gpu_event = asyncio.Event()

    def gpu_done(self, held_ms: int) -> None:
        self.gpu_proc_ms = held_ms if self.gpu_proc_ms is None else 0.8 * self.gpu_proc_ms + 0.2 * held_ms
        self._gpu_event.set()

    def synth_done(self, synth_ms: int) -> None:
        self.ema_synth_ms = synth_ms if self.ema_synth_ms == 0 else 0.8 * self.ema_synth_ms + 0.2 * synth_ms

    def _gpu_eff_ms(self) -> float:
        return (self.gpu_proc_ms or 0.0) / max(1, len(self.engine.devices))

    async def before_dispatch(self) -> None:
        e = self.engine
        waiting = len(e.gpu_queue)
        in_flight = e.synth_active
        self.ema_waiting = 0.7 * self.ema_waiting + 0.3 * waiting
        if not self.bootstrap and waiting == 0 and in_flight == 0 and e.buffers["pending"] == 0:
            self.bootstrap, self.bootstrap_dispatched = True, 0
            self.rebootstraps += 1
            e.log.info(
                tracing.ENGINE,
                msg.PACER_REBOOTSTRAP,
                ("rebootstrap", self.rebootstraps),
                ("gpu_proc_ms", Quoted(f"{self.gpu_proc_ms or 0.0:.1f}")),
            )
        if self.bootstrap:
            self.bootstrap_dispatched += 1
            if self.bootstrap_dispatched > self.target:
                e.log.info(tracing.ENGINE, msg.PACER_BOOTSTRAP_DONE)
                self._gpu_event.clear()
                if self.gpu_proc_ms is None:
                    await self._gpu_event.wait()
                self.bootstrap = False
                e.log.info(
                    tracing.ENGINE,
                    msg.PACER_CALIBRATED,
                    ("gpu_proc_ms", Quoted(f"{self.gpu_proc_ms or 0.0:.1f}")),
                    ("gpu_eff_ms", Quoted(f"{self._gpu_eff_ms():.1f}")),
                    ("ema_waiting", Quoted(f"{self.ema_waiting:.2f}")),
                )
        else:
            error = (self.ema_waiting - self.target) / self.target
            self.integral = max(-10.0, min(10.0, self.integral + error))
            self.interval_ms = max(0.0, self._gpu_eff_ms() * (1 + self.KP * error + self.KI * self.integral))
            wait_s = self.last_dispatch + self.interval_ms / 1000 - time.monotonic()
            if wait_s > 0:
                await asyncio.sleep(wait_s)
        self.last_dispatch = time.monotonic()
        self.dispatches += 1
        if self.dispatches % 5 == 0:
            e.log.info(
                tracing.ENGINE,
                msg.PACER_STATUS,
                ("total", self.dispatches),
                ("in_flight", in_flight),
                ("waiting", waiting),
                ("ema_waiting", Quoted(f"{self.ema_waiting:.2f}")),
                ("gpu_proc_ms", Quoted(f"{self.gpu_proc_ms or 0.0:.1f}")),
                ("gpu_eff_ms", Quoted(f"{self._gpu_eff_ms():.1f}")),
                ("ema_synth_ms", Quoted(f"{self.ema_synth_ms:.1f}")),
                ("interval_ms", Quoted(f"{self.interval_ms:.1f}")),
                ("integral", Quoted(f"{self.integral:.3f}")),
                ("bootstrap", self.bootstrap),
                ("rebootstraps", self.rebootstraps),
            )
