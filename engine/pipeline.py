"""The proving pipeline with the daemon's semantics (docs/daemon-interface.md §3.10, §6), on emulated time.

Scheduler queue (priority, then arrival) → batch tasks (``synthesis_concurrency``: parse, SRS,
split into partitions, or whole-proof synthesis for monolithic kinds and PoRep batches) → one
dispatcher admitting partitions in (job sequence, partition) order against the budget → a bounded
hand-off channel → synthesis workers (``synth_worker_count``) → GPU priority queue → GPU workers
(``gpu_workers_per_device`` per GPU sharing one mutex) → finalizers. Every duration logged
(``synth_ms``, TIMELINE offsets, ``gpu_ms`` …) is real wall-clock time of the engine, i.e. the
modelled time × ``time_scale``.

The stages live in modules of their own, each naming the upstream code it imitates:
:mod:`engine.state` (the shared state and records), :mod:`engine.synthesis`,
:mod:`engine.gpu_stage`, :mod:`engine.completion`, :mod:`engine.legacy` and :mod:`engine.pacer`.
This module puts them together (engine.rs ``Engine``: start, shutdown, submission) and keeps the
views /status and GetStatus read.

Job tracking follows engine.rs ``JobTracker``: every caller (Prove, AwaitProof) has its own waiter,
results are delivered to all waiters of a job id and kept; a waiter that goes away (deadline,
cancel) never touches the job. Partition results are routed by job id to ``assemblers``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Final

from cuzktui import daemon_messages as msg

from . import tracing
from .inputs import Payload
from .jobs import PRIORITY_NAMES, Job, JobResult, ProofRequest
from .legacy import LegacyWorkers
from .synthesis import SynthesisStage

COMPLETED_RETENTION_S: Final = 30.0  # /status keeps finished pipelines this long (real seconds)


class Engine(SynthesisStage, LegacyWorkers):
    """The stand-in daemon's engine: its stages over one state (engine.rs ``Engine``)."""

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

    def submit(self, request: ProofRequest, payload: Payload | None = None) -> tuple[Job, int]:
        """SubmitProof (engine.rs ``Engine::submit``): registers a waiter nobody listens to (its
        receiver is dropped at once: the id becomes known to AwaitProof) and enqueues a new job,
        even when the same id is already in flight. Returns the job and its queue position.

        ``payload``: where the input lies (a gRPC message's bytes); None: the request's own fields."""
        job_id = request.request_id or str(uuid.uuid4())
        self.waiters.setdefault(job_id, []).append(asyncio.get_running_loop().create_future())
        return self._enqueue(request, job_id, payload)

    def prove(self, request: ProofRequest, payload: Payload | None = None) -> asyncio.Future[JobResult]:
        """Prove (engine.rs ``Engine::prove``): this caller's own waiter, then a new job under the
        id. A second Prove with an id in flight proves it again; the first completion answers every
        waiter of the id, later ones find none (upstream's behaviour for Curio's retries)."""
        job_id = request.request_id or str(uuid.uuid4())
        waiter: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(job_id, []).append(waiter)
        self._enqueue(request, job_id, payload)
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

    def _enqueue(self, request: ProofRequest, job_id: str, payload: Payload | None) -> tuple[Job, int]:
        future: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
        job = Job(request, job_id, next(self._arrivals), future)
        self._read_input(job, payload if payload is not None else Payload.of(request))
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

    def uptime(self) -> float:
        return time.monotonic() - self.created

    def prune_pipelines(self) -> None:
        now = time.monotonic()
        for job_id, job in list(self.pipelines.items()):
            # status.rs snapshot: only jobs it was told completed age out; failed ones stay forever.
            if job.completed_at is not None and now - job.completed_at >= COMPLETED_RETENTION_S:
                del self.pipelines[job_id]
