"""The dispatch pacer (``pipeline.max_gpu_queue_depth`` > 0).

upstream extern/cuzk/cuzk-core/src/engine.rs ``DispatchPacer`` (a PI controller with the GPU's
rate fed forward), consulted by the partition dispatcher before each dispatch; its lines are
docs/daemon-interface.md §4.6.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Final

from cuzktui import daemon_messages as msg

from . import tracing
from .tracing import Quoted

if TYPE_CHECKING:
    from .state import EngineState


class Pacer:
    """A PI pacer that spaces out synthesis dispatch to keep about ``target`` synthesized
    partitions waiting for the GPU (``max_gpu_queue_depth``; docs/daemon-interface.md §3.10, §4.6 pacer lines)."""

    KP: Final = 0.5
    KI: Final = 0.05

    def __init__(self, engine: EngineState, target: int) -> None:
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
