"""Periodic samples of a supervised daemon, recorded as observed events.

One recorder serves every process that owns a daemon — the TUI's live controller and the
headless benchmark runner — so a session holds the same RSS / cgroup / budget / GPU series
whoever recorded it. It follows the supervisor's *current* daemon: after a restart (an applied
config, an OOM recovery) the next sample is taken from the new process and its cgroup.

Blocking reads (psutil, cgroup files, NVML) run in a thread via :func:`run_periodic`; the
status endpoint and GetStatus are polled on the event loop. Neither loop overlaps itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from . import events as ev
from .client import ClientError, StatusError, engine_rss_bytes, fetch_status_json, poll_status
from .samplers import GpuSampler, ProcessTreeSampler, run_periodic
from .supervisor import Supervisor, SupervisorError

Record = Callable[[ev.ObservedEvent], None]


class DaemonRecorder:
    """Samples the supervisor's daemon every ``interval`` seconds into ``record`` until stopped."""

    def __init__(self, supervisor: Supervisor, record: Record, interval: float = 1.0) -> None:
        self.supervisor = supervisor
        self._record = record
        self.interval = interval
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._gpu: GpuSampler | None = None
        self._memory: ProcessTreeSampler | None = None
        self._budget: tuple[int | None, int | None] = (None, None)
        self._counts: tuple[float | None, int, int] | None = None  # the last DaemonProofCounts recorded, by run

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(run_periodic(self._sample, self._record, self.interval, self._stop)),
            asyncio.create_task(self._poll_daemon()),
        ]

    async def stop(self) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._gpu is not None:
            self._gpu.close()
            self._gpu = None

    async def sample_now(self) -> None:
        """One sample of everything, now (marks moments such as "ready" and "about to stop")."""
        await self._poll_status_once()
        for event in await asyncio.to_thread(self._sample):
            self._record(event)

    @property
    def gpu_state(self) -> str | None:
        """NVML's state ("1 NVIDIA GPU via NVML", "no NVIDIA GPU (…)"), once sampled."""
        return self._gpu.state if self._gpu is not None else None

    # -- in a thread ----------------------------------------------------------------------

    def _sample(self) -> list[ev.ObservedEvent]:
        if self._gpu is None:
            self._gpu = GpuSampler()  # NVML's initialisation blocks: not on the event loop
        samples: list[ev.ObservedEvent] = []
        memory = self._memory_sampler()
        if memory is not None:
            memory.set_budget(*self._budget)
            rss = self._engine_rss()
            memory.set_reported_rss(rss)
            samples.extend(self._engine_view(sample, rss is not None) for sample in memory.sample())
        elif self.supervisor.mode == "attached" and self.supervisor.pid is None:
            # An engine attached to with no pid to watch (another user's, or across TCP): its box is still
            # charted, from its /status; a real daemon's process is not there to measure.
            rss = self._engine_rss()
            if rss is not None:
                samples.append(ev.MemorySample(time.time(), rss, None, None, *self._budget))
        samples.extend(self._gpu.sample(memory.tree_pids() if memory is not None else ()))
        return samples

    def _engine_rss(self) -> int | None:
        """An engine's box RSS now, launched or attached to (its /status, read with this sample: the box
        changes faster than a second's poll would follow), in real bytes; None for a real daemon (its
        /status is not read twice a second) or without an answer."""
        s = self.supervisor
        if s.memory_scale is None or not s.status_url:
            return None
        try:
            document = asyncio.run(fetch_status_json(s.status_url, timeout=self.interval))
        except (StatusError, OSError, TimeoutError):
            return None
        return None if document is None else engine_rss_bytes(document)

    def _memory_sampler(self) -> ProcessTreeSampler | None:
        s = self.supervisor
        if s.pid is None or not s.running:
            return None
        if self._memory is None or self._memory.pid != s.pid:
            cgroup_dir = s.cgroup.path if s.cgroup is not None else None
            self._memory = ProcessTreeSampler(s.pid, cgroup_dir=cgroup_dir)
        return self._memory

    def _engine_view(self, sample: ev.ObservedEvent, reported_rss: bool) -> ev.ObservedEvent:
        """An engine outside a cgroup of its own (one attached to is in whatever group it was started in)
        shares this machine's: that usage, scaled up to the emulated box, would mean nothing (a 24 GiB
        laptop container read as a 6 TiB box), so drop it.
        Its process tree's RSS is not the box's either (the interpreter, the inputs in flight): until
        its /status reports the box's, it has none."""
        s = self.supervisor
        if s.memory_scale is None or not isinstance(sample, ev.MemorySample):
            return sample
        if s.cgroup is None:
            sample = replace(sample, cgroup_usage_bytes=None, cgroup_limit_bytes=None)
        if not reported_rss:
            sample = replace(sample, rss_bytes=None)
        return sample

    def _daemon_up(self) -> bool:
        """A launched daemon that still runs, or an attached one (whose process we may not see)."""
        return self.supervisor.running or self.supervisor.mode == "attached"

    # -- on the loop ----------------------------------------------------------------------

    async def _poll_daemon(self) -> None:
        """The daemon's /status (budget, pipeline now) and GetStatus (its proof counts; without NVML, its VRAM)."""
        while not self._stop.is_set():
            await self._poll_status_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval)

    async def _poll_status_once(self) -> None:
        s = self.supervisor
        if self._daemon_up() and s.status_url:
            with contextlib.suppress(StatusError, OSError, TimeoutError):
                # Without the daemon's log, /status per-partition states are all the waterfall has.
                snapshot = await poll_status(s.status_url, partitions=s.log_path is None)
                if snapshot is not None:
                    self._budget = (snapshot.budget_total_bytes, snapshot.budget_used_bytes)
                    self._record(snapshot)
        if self._daemon_up():
            await self._poll_get_status()

    async def _poll_get_status(self) -> None:
        status = self.supervisor.recent_status(self.interval)
        if status is None:
            try:
                status = await self.supervisor.client.get_status()
            except (ClientError, SupervisorError):
                return
        t = time.time()
        # The proof counts: recorded when they change, or when the supervisor watches another daemon run (a
        # restart zeroes them, and the model ties them to the run they were read in).
        counts = (self.supervisor.run_began, status.total_proofs_completed, status.total_proofs_failed)
        if counts != self._counts:
            self._counts = counts
            self._record(ev.DaemonProofCounts(t, status.total_proofs_completed, status.total_proofs_failed))
        if self._gpu is None or self._gpu.available:
            return
        seen: set[int] = set()
        for gpu in status.gpus:  # one entry per GPU worker: keep one per ordinal
            if gpu.ordinal in seen:
                continue
            seen.add(gpu.ordinal)
            total = gpu.vram_total_bytes or None
            used = gpu.vram_total_bytes - gpu.vram_free_bytes if total else None
            self._record(ev.GpuSample(t, gpu.ordinal, gpu.name, used, total, None, "daemon"))
