"""How long things take in the engine, in modelled seconds (multiplied by ``[engine] time_scale``).

Figures come from docs/daemon-interface.md §9.4 (RTX 5070 Ti, 96 cores, DDR5):

* PoRep partition synthesis: 29 s alone. Other kinds scale by constraint count
  (SnapDeals ≈ 81 M / 130 M, WindowPoSt ≈ 125 M / 130 M); WinningPoSt synthesis 52 ms.
* GPU, per partition: a short CPU setup before the per-GPU mutex (``GPU_PRE_LOCK``), the
  kernels with the mutex held (PoRep 3.0 s), then b_g2_msm on the CPU in the finalizer
  (``B_G2_MSM``), which overlaps the next prove. With ``gpu_workers_per_device = 2`` one
  worker's setup overlaps the other's kernels, so the GPU is busy 3.0 s per partition instead of
  3.2 s (the documented "+6 %").
* SRS load at ``SRS_LOAD_BYTES_PER_S`` (44 GiB in ≈ 15 s), C1 parse 0.3 s, PCE extraction 47 s.

Contention model for synthesis (:class:`CpuPool`). Synthesis is memory-bandwidth bound, so
partitions slow each other down as soon as more than one runs, and once the cores are all busy
they time-share them as well. With ``n`` partition syntheses (and PCE extractions) running
at once, each progresses at ``1 / slowdown(n)`` of its isolated speed:

    slowdown(n) = (1 + ALPHA × (n − 1)) × max(1, n / slots),    slots = cpus / SYNTH_CORES_PER_PARTITION

with ALPHA = 0.055 and 8 cores per partition (12 slots on the 96-core documented box). It is a
processor-sharing (fluid) model: when ``n`` changes, every running synthesis changes speed from
that moment. Calibration (steady state, partitions/second = n / (29 s × slowdown(n))):
n=2 → 153 s/proof (documented 152), n=7 → 55 s (53), n=10 → 43.4 s (42.5), n=12 → 38.8 s
limited by the GPU at 30–33 s (42.5); n=30 → 62.7 s, the documented collapse (≈60 s).
The same constants give 43 s for 10 partitions at once where one quoted measurement says
36.5 s; the tiers are the figures operators plan with, so they win. Each synthesis also gets a
deterministic ±``JITTER`` spread (from ``[engine] seed``) so waterfalls look like real ones.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Final

from cuzktui.daemon_facts import POREP_PARTITION_GPU_S, POREP_PARTITION_SYNTH_S, SRS_LOAD_BYTES_PER_S, ProofKind

ALPHA: Final = 0.055
SYNTH_CORES_PER_PARTITION: Final = 8
JITTER: Final = 0.03

SYNTH_S: Final = {
    ProofKind.POREP_SEAL_COMMIT: POREP_PARTITION_SYNTH_S,
    ProofKind.SNAP_DEALS_UPDATE: POREP_PARTITION_SYNTH_S * 81 / 130,
    ProofKind.WINDOW_POST_PARTITION: POREP_PARTITION_SYNTH_S * 125 / 130,
    ProofKind.WINNING_POST: 0.052,
}
GPU_MUTEX_S: Final = {
    ProofKind.POREP_SEAL_COMMIT: POREP_PARTITION_GPU_S,
    ProofKind.SNAP_DEALS_UPDATE: POREP_PARTITION_GPU_S * 81 / 130,
    ProofKind.WINDOW_POST_PARTITION: POREP_PARTITION_GPU_S * 125 / 130,
    ProofKind.WINNING_POST: 0.60,
}
GPU_PRE_LOCK_FRACTION: Final = 0.2 / POREP_PARTITION_GPU_S  # setup before the mutex, relative to kernel time
B_G2_MSM_FRACTION: Final = 0.5 / POREP_PARTITION_GPU_S  # finalizer CPU tail, relative to kernel time
FINALIZE_PROCESS_S: Final = 0.05
C1_PARSE_S: Final = 0.3
PCE_EXTRACT_S: Final = 47.0
SRS_BYTES_PER_S: Final = SRS_LOAD_BYTES_PER_S


def srs_load_s(size_bytes: int) -> float:
    return size_bytes / SRS_BYTES_PER_S


def slowdown(n: int, slots: float) -> float:
    if n <= 1:
        return 1.0
    return (1 + ALPHA * (n - 1)) * max(1.0, n / slots)


class Clock:
    """Model seconds ↔ real seconds."""

    def __init__(self, time_scale: float) -> None:
        self.scale = time_scale

    async def sleep(self, model_s: float) -> None:
        await asyncio.sleep(max(0.0, model_s * self.scale))

    def real(self, model_s: float) -> float:
        return model_s * self.scale


class CpuPool:
    """Processor-sharing emulation of concurrent syntheses (see the module docstring)."""

    def __init__(self, cpus: int, clock: Clock) -> None:
        self.slots = max(1.0, cpus / SYNTH_CORES_PER_PARTITION)
        self.clock = clock
        self._remaining: dict[int, float] = {}  # job → model seconds of isolated work left
        self._done: dict[int, asyncio.Future[None]] = {}
        self._ids = itertools.count()
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    @property
    def running(self) -> int:
        return len(self._remaining)

    async def run(self, work_s: float) -> None:
        """Returns once ``work_s`` isolated model seconds of synthesis have been done."""
        loop = asyncio.get_running_loop()
        self._advance(loop.time())
        job = next(self._ids)
        self._remaining[job] = work_s
        self._done[job] = loop.create_future()
        self._reschedule(loop)
        try:
            await self._done[job]
        finally:
            # A cancelled synthesis stops sharing the cores.
            if job in self._remaining:
                self._advance(loop.time())
                del self._remaining[job]
                self._reschedule(loop)
            del self._done[job]

    def _advance(self, now: float) -> None:
        elapsed_model = (now - self._last) / self.clock.scale
        self._last = now
        if not self._remaining:
            return
        progress = elapsed_model / slowdown(len(self._remaining), self.slots)
        for job in self._remaining:
            self._remaining[job] -= progress

    def _reschedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._remaining:
            return
        soonest = max(0.0, min(self._remaining.values()))
        delay_model = soonest * slowdown(len(self._remaining), self.slots)
        self._timer = loop.call_at(self._last + delay_model * self.clock.scale, self._on_timer)

    def _on_timer(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = None
        self._advance(loop.time())
        for job in [j for j, left in self._remaining.items() if left <= 1e-6]:
            del self._remaining[job]
            future = self._done[job]
            if not future.done():
                future.set_result(None)
        self._reschedule(loop)
