"""The GPU stage: workers taking synthesized partitions (or whole proofs) off the GPU queue.

upstream extern/cuzk/cuzk-core/src/engine.rs: the GPU workers of ``Engine::start`` (``gpu_workers_per_device``
per GPU sharing one mutex), the finalizer they spawn, and ``PriorityWorkQueue`` (a BTreeMap on
``(job_seq, partition)`` with ``job_seq`` counting from 0): every monolithic item (PoSt,
multi-sector batches) goes in at ``(0, 0)``, so one queued while another still waits replaces it
and the first's callers are never answered (docs/daemon-interface.md §11.18); partition 0 of the
first pipeline shares that key. The CUZK_TIMING and ntt_msm_h lines are those of the supraseal
Groth16 prover the daemon calls.
"""

from __future__ import annotations

import time
from typing import Final

from cuzktui import daemon_messages as msg
from cuzktui.daemon_facts import ProofKind
from cuzktui.units import GiB

from . import timemodel, tracing
from .completion import Completion
from .jobs import PartState, ms_since
from .state import GpuItem, GpuWorker
from .tracing import Span, option

# Emulated VRAM use: the d_a cache stays allocated after a GPU's first prove (CUZK_TIMING line),
# the working set only while a prove holds the GPU.
D_A_CACHE: Final = 4 * GiB
PROVE_VRAM: Final = 8 * GiB


class GpuStage(Completion):
    """Proves what the synthesis stage queued and hands the result to :class:`Completion`."""

    def _queue_for_gpu(self, key: tuple[int, int], item: GpuItem) -> None:
        """engine.rs ``gpu_work_queue.push``: an item queued at the same key is dropped silently,
        its memory freed, its callers never answered (the daemon's bug, reproduced)."""
        dropped = self.gpu_queue.put(key, item)
        if dropped is not None:
            self._drop_item(dropped)
            if dropped.partition is None:
                for job in dropped.jobs:
                    self._release_srs(job)

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
