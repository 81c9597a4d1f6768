"""The engine's state, shared by its stages, and the records the stages hand each other.

upstream extern/cuzk/cuzk-core/src/engine.rs ``Engine`` and ``Engine::start`` (the scheduler, the
synthesis and GPU work queues, the JobTracker's waiters and kept results, the partition assemblers
``PartitionedJobState``, the per-GPU mutexes), status.rs ``StatusTracker`` (``pipelines``, buffer
counts) and memory.rs (the budget, its "auto" total and its evictor). Each stage is a class over
:class:`EngineState` in a module of its own (synthesis.py → gpu_stage.py → completion.py, legacy.py
beside them); pipeline.py assembles them into :class:`~engine.pipeline.Engine`.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import deque
from dataclasses import dataclass, field

from cuzktui import daemon_messages as msg
from cuzktui.daemon_config import Config
from cuzktui.daemon_facts import (
    DAEMON_PROCESS_RSS,
    DEFAULT_MAX_PARALLEL_SYNTHESIS,
    PARTITION_BUDGET_UNIT,
    KindFacts,
)
from cuzktui.proofinputs import InputError

from . import inputs, timemodel, tracing
from .jobs import Job, JobResult, Partition
from .memory import Arena, Block, Budget, InputsHeld, Memory, Reservation, gib
from .pacer import Pacer
from .pinned import PinnedBuffer, PinnedPool
from .queues import ClosableQueue
from .srs import Residency
from .timemodel import Clock, CpuPool
from .tracing import Logger


def budget_total(config: Config) -> int:
    """``auto`` = MemTotal − safety_margin in nominal bytes, MemTotal being the emulated box's RAM
    (``[engine] mem_total``); like the daemon's, the cgroup limit is not consulted."""
    if config.total_budget is not None:
        return config.total_budget
    return max(0, config.engine.mem_total - config.safety_margin)


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


class EngineState:
    """What every stage reads and writes: built once from the config (engine.rs ``Engine::new`` and
    ``start``), with the helpers both proving paths use."""

    def __init__(self, config: Config, log: Logger, memory: Memory | None = None) -> None:
        """``memory``: where the model's real memory is mapped (the box process of ``--box-cgroup``,
        engine/box.py); None: this process."""
        self.config = config
        self.log = log
        self.created = time.monotonic()
        self.clock = Clock(config.engine.time_scale)
        self.rng = random.Random(config.engine.seed)
        for message in config.deprecated_present:
            log.warn(tracing.CONFIG, message)
        self.budget = Budget(budget_total(config), log)
        self.arena = Arena(config.engine.memory_scale, memory)
        self.inputs_held = InputsHeld()
        # Where payloads are read: the daemon sets its reader process (engine/reader.py).
        self.read_input: inputs.Reading = inputs.read_on_a_thread
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
        devices = config.emulated_gpus
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

    @property
    def box_rss(self) -> int:
        """The emulated box's RSS in its bytes: the daemon's own process and the model's allocations."""
        return DAEMON_PROCESS_RSS + self.arena.nominal_in_use

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

    def _dequeued(self, job: Job) -> None:
        display = job.facts.display
        self.log.info(tracing.SCHEDULER, msg.JOB_DEQUEUED, ("job_id", job.job_id), ("proof_kind", display))

    def _read_input(self, job: Job, payload: inputs.Payload) -> None:
        """Reads the payload now, on a thread (upstream parses on blocking threads: the event loop,
        and GetStatus with it, never waits for a 68 MB C1), into what :meth:`_parse` checks later;
        the request keeps none of it. Only the summary stays, like upstream's finished status."""
        request = job.request
        request.vanilla_proof, request.vanilla_proofs = b"", []
        job.input_size = payload.size
        self.inputs_held.hold()

        async def read() -> inputs.InputSummary:
            try:
                return await self.read_input(request, payload)
            finally:
                self.inputs_held.release()

        job.reading = asyncio.ensure_future(read())

    async def _parse(self, job: Job, path: inputs.Path) -> InputError | None:
        """Parses the input as the daemon does on ``path`` (:mod:`engine.inputs`), taking the parse's
        modelled time; returns the failure (upstream's context text) or None."""
        assert job.reading is not None
        parse_s = timemodel.C1_PARSE_S * min(1.0, job.input_size / 51e6)
        try:
            summary, _ = await asyncio.gather(job.reading, self.clock.sleep(parse_s))
        except (OSError, RuntimeError) as failure:  # the reader process gone: the emulator's fault, this job's end
            return InputError(f"task panicked: {failure}")
        job.input, job.digest = summary, summary.digest
        try:
            job.parsed = inputs.check(job.request, summary, path)
        except InputError as err:
            return err
        if job.parsed.vanilla_partitions is not None:
            job.vanilla_partitions = job.parsed.vanilla_partitions
        return None

    def _jittered(self, seconds: float) -> float:
        return seconds * (1 + self.rng.uniform(-timemodel.JITTER, timemodel.JITTER))

    def _status_partition(self, job: Job, index: int) -> Partition | None:
        """The /status entry of a partition: status.rs looks jobs up by id, so with two jobs under
        one id the later registration receives both jobs' updates."""
        shown = self.pipelines.get(job.job_id)
        return None if shown is None or index >= len(shown.partitions) else shown.partitions[index]
