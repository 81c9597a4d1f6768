"""The legacy path (``pipeline.enabled = false``): one whole proof at a time per GPU worker.

upstream extern/cuzk/cuzk-core/src/engine.rs ``Engine::start``, its monolithic workers: straight
from the scheduler, no TIMELINE, no partitions, no /status entries, the SRS outside the budget;
prover.rs ``prove_*`` for the proving lines.
"""

from __future__ import annotations

import time

from cuzktui import daemon_messages as msg
from cuzktui.daemon_facts import ProofKind
from cuzktui.proofinputs import InputError

from . import inputs, timemodel, tracing
from .completion import Completion
from .jobs import JobResult, Status, ms_since, partition_proof
from .prover import prover_lines
from .state import GpuWorker
from .tracing import Span


class LegacyWorkers(Completion):
    """The GPU workers of the monolithic mode."""

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
            error = await self._parse(job, inputs.Path.MONOLITHIC)
            prove_ms = 0
            if error is None:
                prover = prover_lines(job)
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
