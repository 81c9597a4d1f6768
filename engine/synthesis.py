"""The synthesis stage: batches from the scheduler, partitions dispatched against the budget, synthesis.

upstream extern/cuzk/cuzk-core/src/engine.rs ``Engine::start`` (the "synthesis dispatcher" loop,
``dispatch_batch``, ``process_batch``, the partition dispatcher and its bounded channel, the
synthesis workers), batch_collector.rs ``BatchCollector``, pipeline.rs ``synthesize_*`` and
``build_partition_circuit_from_parsed``, pinned_pool.rs (the a/b/c buffers).

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
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Final

from cuzktui import daemon_messages as msg
from cuzktui.daemon_facts import (
    PARTITION_BUDGET_UNIT,
    PARTITION_RSS_AFTER_ABC_FREE,
    SYNTHESIZED_PARTITION_RSS,
    KindFacts,
    ProofKind,
)
from cuzktui.units import GiB

from . import inputs, timemodel, tracing
from .gpu_stage import GpuStage
from .jobs import Job, Partition, PartState, ms_since, rust_duration
from .memory import Block, Reservation, gib
from .pinned import SCALAR_SIZE, PinnedBuffer
from .prover import mono_synthesis_lines
from .srs import CONSTRAINTS
from .state import Assembler, GpuItem
from .tracing import Quoted, Span

# A multi-sector PoRep batch reserves a flat 136 GiB whatever its size (docs/daemon-interface.md §6.2).
BATCH_RESERVATION: Final = 136 * GiB
BATCHABLE: Final = (ProofKind.POREP_SEAL_COMMIT, ProofKind.SNAP_DEALS_UPDATE)
GROWTH_STEPS: Final = 8  # a synthesis maps its memory in this many steps as it progresses


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


class SynthesisStage(GpuStage):
    """From the scheduler to the GPU queue (the partitioned path, and whole-proof synthesis)."""

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
        if not self.config.engine.cuda:
            # A build without cuda-supraseal: one ERROR in the dispatcher's span, naming no job, and every
            # request of the batch failed at once (no synthesis, no TIMELINE).
            self.log.error(tracing.ENGINE, msg.PIPELINE_NEEDS_CUDA, span=(span,))
            for member in batch:
                self._fail(member, msg.PIPELINE_NEEDS_CUDA_JOB_ERROR)
            return
        try:
            if len(batch) > 1 or facts.monolithic:
                await self._monolithic(batch, span)
            else:
                await self._split(batch[0], span)
        except Exception as err:  # the emulator's own bug must fail the job, not kill the dispatcher
            for member in batch:
                self._fail(member, f"task panicked: {err}")

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
