"""Chrome Trace Event JSON of a session, for Perfetto (ui.perfetto.dev) or chrome://tracing.

Layout of the trace:

* process "GPU workers": one thread per GPU worker id with one complete (``X``) event ``gpu``
  per partition (GPU_START -> GPU_END). A worker can hold two partitions at once (a finalizer
  overlaps the next prove); such an overlapping event goes to an extra thread of that worker,
  so that no thread has events that overlap without nesting (which the viewers mis-draw).
* one process per job ("job <id>", with the daemon run when it is not the first), one thread
  per partition, with the ``synthesis`` and ``gpu queue`` events of that partition.
* counters (``C``): daemon RSS, cgroup usage and limit, budget used and total, and per GPU its
  used and total memory, all in GiB; instant events for daemon launches/exits, benchmark
  restarts and notices.

Only finished phases become events (a phase cut by a daemon death has no end), so there is
exactly one ``X`` event per finished phase per partition. Timestamps are microseconds on the
timeline's axis (Unix time once anchored).
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final, NamedTuple, TextIO

from . import collector
from .daemon_facts import nominal_bytes
from .events import (
    BenchRestart,
    DaemonExited,
    DaemonLaunched,
    GpuSample,
    MemorySample,
    Notice,
    ObservedEvent,
)
from .timeline import Job, Partition, Timeline, run_number
from .units import GiB

__all__ = ["build_chrome_trace", "write_chrome_trace"]

WORKERS_PID: Final = 1
MEMORY_PID: Final = 2
GPU_MEMORY_PID: Final = 3
EVENTS_PID: Final = 4
FIRST_JOB_PID: Final = 100
# A job's waits before its first synthesis (scheduler, memory budget) go on a thread of their own.
_WAITS_TID: Final = 1_000_000
# Extra threads of one worker (overlapping holds) are numbered worker + k * this.
_OVERLAP_STRIDE: Final = 1000


def _us(t: float) -> int:
    return round(t * 1_000_000)


def _meta(kind: str, pid: int, name: str, tid: int = 0) -> dict[str, Any]:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}


def _complete(name: str, pid: int, tid: int, start: float, end: float, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "ph": "X",
        "name": name,
        "cat": name,
        "pid": pid,
        "tid": tid,
        "ts": _us(start),
        "dur": max(0, _us(end) - _us(start)),
        "args": args,
    }


def _partition_args(job: Job, p: Partition, duration: float) -> dict[str, Any]:
    args: dict[str, Any] = {"job": job.job_id, "partition": p.index, "duration_ms": round(duration * 1000, 3)}
    if job.segment:
        args["daemon_run"] = run_number(job.segment)
    return args


def _job_events(timeline: Timeline) -> Iterator[dict[str, Any]]:
    yield _meta("process_name", WORKERS_PID, "GPU workers")
    holds: list[_Hold] = []
    for n, job in enumerate(timeline.jobs()):
        pid = FIRST_JOB_PID + n
        run = f" (daemon run {run_number(job.segment)})" if job.segment else ""
        title = f"job {job.job_id}{run} — {job.status}"
        if job.overtaken_by:
            title += f" (replaced in the monolithic GPU queue by {job.overtaken_by})"
        yield _meta("process_name", pid, title)
        yield {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}}
        waits = (
            ("scheduler wait", job.enqueued_at, job.dequeued_at),
            ("budget wait", job.dispatched_at, job.first_start),
        )
        if any(a is not None and b is not None for _, a, b in waits):
            yield _meta("thread_name", pid, "before synthesis", _WAITS_TID)
        for name, a, b in waits:
            if a is not None and b is not None:
                yield _complete(name, pid, _WAITS_TID, a, b, {"job": job.job_id, "duration_ms": _ms(b - a)})
        for p in sorted(job.partitions.values(), key=lambda q: q.index):
            yield _meta("thread_name", pid, "monolithic" if job.monolithic else f"partition {p.index}", p.index)
            if p.synth_start is not None and p.synth_end is not None:
                args = _partition_args(job, p, p.synth_end - p.synth_start)
                args["synth_ms"] = p.synth_ms
                yield _complete("synthesis", pid, p.index, p.synth_start, p.synth_end, args)
            if p.gpu_queue is not None and p.gpu_pickup is not None:
                args = _partition_args(job, p, p.gpu_pickup - p.gpu_queue)
                args["worker"] = p.worker
                yield _complete("gpu queue", pid, p.index, p.gpu_queue, p.gpu_pickup, args)
            if p.gpu_start is not None and p.gpu_end is not None and p.worker is not None:
                args = _partition_args(job, p, p.gpu_end - p.gpu_start)
                args.update(worker=p.worker, gpu_ms=p.gpu_ms, pre_prove_ms=_ms(p.pre_prove_s))
                args.update({f"GPU_TIMING {k}": v for k, v in p.gpu_timing.items()})
                args.update({f"FIN_TIMING {k}": v for k, v in p.fin_timing.items()})
                args.update({f"CUZK_TIMING {k}": v for k, v in p.cuzk_timing.items()})
                args.update({f"CUZK_NTT_H {k}": v for k, v in p.ntt_timing.items()})
                holds.append(_Hold(p.worker, p.gpu_start, p.gpu_end, args))
    yield from _gpu_events(holds, timeline)


class _Hold(NamedTuple):
    worker: int
    start: float
    end: float
    args: dict[str, Any]


def _gpu_events(holds: list[_Hold], timeline: Timeline) -> list[dict[str, Any]]:
    """Each GPU hold on the first thread of its worker that is free at its start; a thread's name
    says the worker's GPU when the log named it (Timeline.worker_gpu)."""
    placed: list[dict[str, Any]] = []
    thread_ends: dict[int, list[float]] = {}  # worker -> end of the last event on each of its threads
    named: set[int] = set()
    for worker, start, end, args in sorted(holds, key=lambda h: (h.worker, h.start)):
        ends = thread_ends.setdefault(worker, [])
        slot = next((i for i, last in enumerate(ends) if last <= start), len(ends))
        if slot == len(ends):
            ends.append(end)
        else:
            ends[slot] = end
        tid = worker + slot * _OVERLAP_STRIDE
        if tid not in named:
            named.add(tid)
            gpu = timeline.worker_gpu(worker)
            label = f"GPU worker {worker}" + (f" on GPU{gpu}" if gpu is not None else "")
            label += f" (overlap {slot})" if slot else ""
            placed.append(_meta("thread_name", WORKERS_PID, label, tid))
        placed.append(_complete("gpu", WORKERS_PID, tid, start, end, args))
    return placed


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _counter(pid: int, name: str, t: float, value: float) -> dict[str, Any]:
    return {"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": _us(t), "args": {"GiB": round(value / GiB, 4)}}


def _instant(t: float, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "i", "s": "g", "name": name, "pid": EVENTS_PID, "tid": 0, "ts": _us(t), "args": args}


def _nominal_or_none(real_bytes: int | None, scale: float | None) -> float | None:
    return None if real_bytes is None else nominal_bytes(real_bytes, scale)


def _observed_events(observed: Iterable[ObservedEvent]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    seen_pids: set[int] = set()
    scale: float | None = None  # an engine's memory_scale: its RSS is shown as the box it emulates
    for ev in observed:
        if isinstance(ev, MemorySample):
            for name, value in (
                ("daemon RSS", _nominal_or_none(ev.rss_bytes, scale)),
                ("cgroup usage", _nominal_or_none(ev.cgroup_usage_bytes, scale)),
                ("cgroup limit", _nominal_or_none(ev.cgroup_limit_bytes, scale)),
                ("budget used", ev.budget_used_bytes),  # the daemon's own figures: already nominal
                ("budget total", ev.budget_total_bytes),
            ):
                if value is not None:
                    events.append(_counter(MEMORY_PID, name, ev.t, value))
                    seen_pids.add(MEMORY_PID)
        elif isinstance(ev, GpuSample):
            for name, value in ((f"GPU {ev.index} used", ev.used_bytes), (f"GPU {ev.index} total", ev.total_bytes)):
                if value is not None:
                    events.append(_counter(GPU_MEMORY_PID, name, ev.t, value))
                    seen_pids.add(GPU_MEMORY_PID)
        elif isinstance(ev, DaemonLaunched):
            scale = ev.memory_scale
            events.append(_instant(ev.t, "daemon launched", {"pid": ev.pid, "mode": ev.mode, "listen": ev.listen}))
        elif isinstance(ev, DaemonExited):
            args = {"pid": ev.pid, "cause": ev.cause, "returncode": ev.returncode, "evidence": list(ev.evidence)}
            events.append(_instant(ev.t, f"daemon exited ({ev.cause})", args))
        elif isinstance(ev, BenchRestart):
            restart = {"attempt": ev.attempt, "reason": ev.reason, "total_budget": ev.total_budget}
            events.append(_instant(ev.t, "benchmark restarted the daemon", restart))
        elif isinstance(ev, Notice):
            events.append(_instant(ev.t, ev.text, {"level": ev.level}))
        else:
            continue
        if events[-1]["ph"] == "i":
            seen_pids.add(EVENTS_PID)
    names = {MEMORY_PID: "Memory", GPU_MEMORY_PID: "GPU memory", EVENTS_PID: "Daemon and benchmark"}
    return [_meta("process_name", pid, names[pid]) for pid in sorted(seen_pids)] + events


# Events encoded at once when writing: each batch is one call of the C encoder, and only one batch of
# event dicts is alive at a time (all of a week's log at once held hundreds of MB).
_WRITE_BATCH: Final = 2000


def _trace_tail() -> dict[str, Any]:
    """What a trace holds besides its events (written after them)."""
    return {"displayTimeUnit": "ms", "otherData": {"source": "cuzk-tui"}}


def _trace_events(timeline: Timeline, observed_events: Iterable[ObservedEvent]) -> Iterator[dict[str, Any]]:
    yield from _job_events(timeline)
    yield from _observed_events(observed_events)


def build_chrome_trace(timeline: Timeline, observed_events: Iterable[ObservedEvent] = ()) -> dict[str, Any]:
    """The trace as a JSON-ready dict (``{"traceEvents": [...], ...}``)."""
    return {"traceEvents": list(_trace_events(timeline, observed_events)), **_trace_tail()}


def _write_trace(f: TextIO, events: Iterable[dict[str, Any]]) -> int:
    """The text ``json.dumps(build_chrome_trace(...), separators=(",", ":"))`` makes, written batch by
    batch from ``events``; the number of events."""
    # The events are fresh dicts of plain values: no cycle to look for (the encoder's bookkeeping of every
    # dict and list it is in was a fifth of the encoding; the text is the same).
    encode = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
    f.write('{"traceEvents":[')
    count = 0
    iterator = iter(events)
    while batch := list(itertools.islice(iterator, _WRITE_BATCH)):
        f.write(("," if count else "") + encode(batch)[1:-1])
        count += len(batch)
    f.write("]," + encode(_trace_tail())[1:])
    return count


def write_chrome_trace(
    path: str | os.PathLike[str], timeline: Timeline, observed_events: Iterable[ObservedEvent]
) -> int:
    """Write the trace to ``path`` atomically (temp file + rename); the number of trace events.

    OSError (unwritable directory, full disk) propagates; the target is then left untouched.
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f, collector.paused():
            count = _write_trace(f, _trace_events(timeline, observed_events))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return count
