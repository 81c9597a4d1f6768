"""The waterfall of a daemon watched without its log, drawn from /status per-partition states.

Upstream's /status (status.rs ``StatusTracker::snapshot``) lists each pipeline job's partitions
with a state (pending, synthesizing, synth_done, gpu, done, failed), ``synth_ms`` / ``gpu_ms``
(the elapsed time while a phase runs, its duration once it ended) and ``uptime_secs`` (since the
tracker was made, at engine start). Successive polls of a daemon whose log we cannot read are
turned into the typed events the timeline already understands: TIMELINE events with offsets on
the engine's clock, a proof assembled when every partition is done, a failure for a failed one.

Coarser than the log, at the poll rate: a phase that starts while running is placed exactly
(``uptime - synth_ms`` is its start), a phase seen only after it ended is placed at the poll that
saw it end, and a job that came and went between two polls is not seen at all. Monolithic PoSt
work never reaches the tracker (engine.rs), so it never shows here.

Memory stays bounded over weeks of polls (``record``): what is kept of a job goes once /status stops
listing it (status.rs drops a job 30 s after it completed), so an id submitted again later is a new job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from . import daemon_messages as M
from .events import EngineStarted, LogEvent, LogRecord, ProofAssembled, ProofFailedLine, StatusSnapshot, TimelineEvent

# The order a partition moves in; a poll may skip states, whose events are then filled in.
_ORDER: Final = ("pending", "synthesizing", "synth_done", "gpu", "done")


@dataclass(slots=True)
class _Seen:
    state: str = "pending"
    synth_start_ms: int | None = None
    synth_end_ms: int | None = None
    gpu_start_ms: int | None = None
    worker: int | None = None


def _optional_int(text: str) -> int | None:
    return int(text) if text else None


class StatusTimeline:
    """Feeds on StatusSnapshot rows (``partitions``) and returns the events each new poll implies."""

    def __init__(self) -> None:
        self._anchored = False
        self._partitions: dict[tuple[str, int], _Seen] = {}
        self._finished: set[str] = set()
        self._worker_gpus: dict[str, str] = {}

    @property
    def drew(self) -> bool:
        """Whether any poll listed partitions: the jobs came from /status."""
        return self._anchored

    def events(self, snapshot: StatusSnapshot) -> list[LogEvent]:
        out: list[LogEvent] = []
        if not snapshot.partitions:
            self._partitions.clear()
            self._finished.clear()
            return out
        if not self._anchored:
            # TIMELINE offset 0 is the engine start: uptime_secs before this poll.
            out.append(EngineStarted(snapshot.t - snapshot.uptime_secs, pipeline_enabled=True))
            self._anchored = True
        for row in snapshot.worker_gpus:
            worker, gpu = row.split("\t")
            if self._worker_gpus.get(worker) != gpu:
                # What the log's worker start line would have said (engine.rs start()): the lane's GPU.
                self._worker_gpus[worker] = gpu
                fields = {"worker_id": worker, "gpu": gpu}
                out.append(LogRecord(None, "INFO", "cuzk_core::engine", M.PIPELINE_WORKER_STARTED, (), fields))
        now_ms = round(snapshot.uptime_secs * 1000)
        jobs: dict[str, list[str]] = {}
        for row in snapshot.partitions:
            job_id, index_text, state, synth_text, gpu_text, worker_text = row.split("\t")
            index = int(index_text)
            jobs.setdefault(job_id, []).append(state)
            if job_id in self._finished:
                continue
            seen = self._partitions.setdefault((job_id, index), _Seen())
            out += self._advance(
                job_id, index, seen, state, now_ms, _optional_int(synth_text), _optional_int(gpu_text),
                _optional_int(worker_text),
            )  # fmt: skip
        for job_id, states in jobs.items():
            if job_id in self._finished:
                continue
            if "failed" in states:
                self._finished.add(job_id)
                failed = states.index("failed")
                message = "partition failed (from /status; the daemon's log was not read)"
                out.append(ProofFailedLine(snapshot.t, message, "", job_id, failed))
            elif all(state == "done" for state in states):
                self._finished.add(job_id)
                out.append(ProofAssembled(snapshot.t, job_id, None, None, None, None))
        self._finished &= jobs.keys()
        for key in [key for key in self._partitions if key[0] not in jobs or key[0] in self._finished]:
            del self._partitions[key]
        return out

    def _advance(
        self,
        job_id: str,
        index: int,
        seen: _Seen,
        state: str,
        now_ms: int,
        synth_ms: int | None,
        gpu_ms: int | None,
        worker: int | None,
    ) -> list[LogEvent]:
        if state not in _ORDER or _ORDER.index(state) <= _ORDER.index(seen.state):
            return []
        out: list[LogEvent] = []

        def emit(name: str, offset_ms: int, **detail: str) -> None:
            # A GPU worker holds the partition from pickup to GPU_END (the queue is no worker's).
            worker = seen.worker if name in ("GPU_PICKUP", "GPU_START", "GPU_END") else None
            fields = {**({"worker": str(worker)} if worker is not None else {}), "partition": str(index), **detail}
            out.append(TimelineEvent(offset_ms, name, job_id, fields, partition=index, worker=worker))

        # A phase first seen while it runs is placed exactly (its *_ms is the time since it began); one
        # first seen after it ended is placed at this poll (its *_ms is then its duration).
        target = _ORDER.index(state)
        if target >= 1 and seen.synth_start_ms is None:
            seen.synth_start_ms = now_ms - (synth_ms or 0)
            emit("SYNTH_START", seen.synth_start_ms)
        if target >= 2 and seen.synth_end_ms is None:
            start = seen.synth_start_ms if seen.synth_start_ms is not None else now_ms
            seen.synth_end_ms = now_ms if synth_ms is None else min(now_ms, start + synth_ms)
            emit("SYNTH_END", seen.synth_end_ms, **({"synth_ms": str(synth_ms)} if synth_ms is not None else {}))
            emit("GPU_QUEUE", seen.synth_end_ms)
        if target >= 3 and seen.gpu_start_ms is None:
            seen.worker = worker
            seen.gpu_start_ms = max(now_ms - (gpu_ms or 0), seen.synth_end_ms or 0)
            emit("GPU_PICKUP", seen.gpu_start_ms)
            emit("GPU_START", seen.gpu_start_ms)
        if target >= 4:
            start = seen.gpu_start_ms if seen.gpu_start_ms is not None else now_ms
            end = now_ms if gpu_ms is None else min(now_ms, start + gpu_ms)
            emit("GPU_END", end, **({"gpu_ms": str(gpu_ms)} if gpu_ms is not None else {}))
        seen.state = state
        return out
