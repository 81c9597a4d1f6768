"""Results: partition proofs assembled per job id, whole proofs split per sector, callers answered.

upstream extern/cuzk/cuzk-core/src/engine.rs ``process_partition_result`` (routed by job id to the
``PartitionedJobState`` that holds it), ``process_monolithic_result`` (the batched branch splits
per sector; pipeline.rs ``split_batched_proofs`` refuses a non-PoRep batch) and ``JobTracker``
(every waiter of an id answered, the result kept for AwaitProof); status.rs ``job_completed``
(told only by the partitioned path).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Final

from cuzktui import daemon_messages as msg
from cuzktui.daemon_facts import ProofKind

from . import inputs, tracing
from .jobs import Job, JobResult, PartState, Status, ms_since, partition_proof
from .state import Assembler, EngineState, GpuItem, GpuWorker

DURATION_WINDOW: Final = 1000  # GetMetrics summarises the last ≤1000 completions


class Completion(EngineState):
    """The end of both proving paths: results, failures, the kept results and counters."""

    def _assembly_failed(self, job: Job) -> bool:
        assembler = self.assemblers.get(job.job_id)
        return assembler is not None and assembler.failed

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
