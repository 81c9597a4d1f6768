"""The post-mortem of a session or a bare daemon log, for someone who was not watching.

Built from the :class:`~cuzktui.model.SessionModel` that replay and export also build (one reader,
one model), so the three always agree on every job's final state. :func:`build_report` gives a
JSON-ready dict; :func:`render_text` the same for a terminal.

Statuses are final: a job still running when the recording ends, or cut by its daemon's death, is
``incomplete`` with the reason; one replaced in the monolithic GPU queue is ``lost`` (its caller is
never answered); ``completed`` means the proof was delivered (a PoRep proof whose self-check failed
after assembly is ``failed``, engine.rs Phase 7).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from . import events as ev
from .model import SessionModel
from .timeline import Job, Timeline, lost_reason, run_number

__all__ = ["build_report", "render_text"]

# Idle stretches shorter than this share of the whole recording are not worth listing.
_GAP_SHARE: Final = 0.02
_GAPS_LISTED: Final = 5
_ENGINE_PREFIX: Final = "cuzk-engine: "
# What jobs drawn from /status lack (status_timeline.py), said under the counts.
STATUS_JOBS: Final = (
    "(jobs from the daemon's /status polls: no log was followed. Coarser than a log: a phase seen only after "
    "it ended is placed at the poll that saw it, a job that came and went between two polls is missed, "
    "monolithic PoSt proofs never show, and no failure has its reason)"
)


def _percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _figures(values: list[float], scale: float) -> dict[str, Any]:
    if not values:
        return {"n": 0, "median_s": None, "p95_s": None}
    median, p95 = _percentile(values, 50) * scale, _percentile(values, 95) * scale
    return {"n": len(values), "median_s": round(median, 3), "p95_s": round(p95, 3)}


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else round(value * scale, 3)


def _phase_of(job: Job) -> str:
    """Where an unfinished job stood when its recording or its daemon run ended."""
    parts = list(job.partitions.values())
    if any(p.gpu_pickup is not None and p.gpu_end is None for p in parts):
        return "on the GPU"
    if any(p.gpu_queue is not None and p.gpu_pickup is None for p in parts) or any(
        p.synth_end is not None and p.gpu_pickup is None for p in parts
    ):
        return "waiting for a GPU"
    if any(p.synth_start is not None and p.synth_end is None for p in parts):
        return "in synthesis"
    if parts and all(p.gpu_end is not None for p in parts):
        return "assembling its proof"
    if job.dispatched_at is not None:
        return "waiting for the memory budget"
    if job.dequeued_at is not None:
        return "parsing its input"
    if job.enqueued_at is not None:
        return "waiting in the scheduler queue"
    return "in flight"


def _exit_text(exit_event: ev.DaemonExited) -> str:
    return exit_event.cause.replace("_", "-") if exit_event.cause != "oom_kill" else "OOM-killed"


def _reason(job: Job, model: SessionModel, exits: dict[int, ev.DaemonExited]) -> str:
    if job.status == "completed":
        return f"delivered from the batch led by {job.batch_leader}" if job.batch_leader else ""
    if job.status == "failed":
        return job.error or "failed"
    if job.status == "lost":
        return lost_reason(job)
    phase = _phase_of(job)
    segment = model.timeline.segments[job.segment]
    if segment.shutdown_at is not None:
        # main.rs / engine.rs: a SIGINT stops the engine's workers while gRPC keeps taking proofs.
        if job.first_time is None or job.first_time >= segment.shutdown_at:
            return (
                "enqueued after the daemon's SIGINT: its engine had stopped, so it was never proved (the daemon "
                "keeps accepting proofs after a SIGINT; restart it)"
            )
        return f"abandoned at the daemon's SIGINT with the job {phase}: its engine stopped its workers"
    if segment.ended:
        exit_event = exits.get(job.segment)
        if exit_event is not None:
            return f"the daemon exited ({_exit_text(exit_event)}) with the job {phase}"
        return f"the daemon restarted with the job {phase}"
    return f"still {phase} when the recording ends"


def _status(job: Job) -> str:
    return "incomplete" if job.status == "running" else job.status


def _job_entry(job: Job, model: SessionModel, exits: dict[int, ev.DaemonExited], scale: float) -> dict[str, Any]:
    return {
        "job_id": job.job_id,
        "daemon_run": run_number(job.segment),
        "kind": job.kind,
        "status": _status(job),
        "reason": _reason(job, model, exits),
        "partitions": len(job.partitions),
        "scheduler_wait_s": _scaled(job.scheduler_wait_s, scale),
        "budget_wait_s": _scaled(job.budget_wait_s, scale),
    }


def _gpu(timeline: Timeline, scale: float) -> dict[str, Any]:
    span = timeline.time_span()
    if span is None:
        return {"busy_share": {}, "idle_gaps": {}, "worker_gpu": {}}
    start, end = span
    min_gap = (end - start) * _GAP_SHARE
    busy: dict[int, float] = {}
    gaps = {}
    for worker in timeline.workers():
        use = timeline.worker_use(worker, start, end, min_gap)
        busy[worker] = use.busy_share
        found = sorted(use.idle_gaps, key=lambda g: g[0] - g[1])[:_GAPS_LISTED]
        gaps[str(worker)] = [{"start": a, "end": b, "seconds": round((b - a) * scale, 3)} for a, b in sorted(found)]
    return {
        "busy_share": {str(w): round(f, 4) for w, f in busy.items()},
        "idle_gaps": gaps,
        # The GPU ordinal each worker proves on, where the log's worker start line was read.
        "worker_gpu": {str(w): gpu for w in busy if (gpu := timeline.worker_gpu(w)) is not None},
    }


def build_report(model: SessionModel, source: str, time_scale: float | None = None) -> dict[str, Any]:
    """Everything the report says, as JSON-ready data (see the module docstring).

    The engine logs real seconds, ``time_scale`` real seconds per modelled one (engine/pipeline.py):
    given an engine's ``time_scale``, every duration is turned back into the emulated box's seconds.
    """
    timeline = model.timeline
    # A bare engine log says what it is in its own WARN lines (engine/__main__.py, "cuzk-engine: …").
    engine = (
        model.daemon.mode == "engine"
        or model.daemon.memory_scale is not None
        or any(r.message.startswith(_ENGINE_PREFIX) for r in model.warnings)
    )
    modelled = engine and time_scale is not None and time_scale > 0
    scale = 1.0 / time_scale if modelled and time_scale else 1.0
    exits = {segment: event for segment, event in model.exits if segment is not None}
    jobs = timeline.jobs()
    entries = [_job_entry(job, model, exits, scale) for job in jobs]
    counts = Counter(entry["status"] for entry in entries)
    partitions = [p for job in jobs for p in job.partitions.values()]
    warnings = Counter(f"{r.level} {r.message}" for r in model.warnings)
    start_error = model.daemon.start_error
    return {
        "source": source,
        "engine_time": engine,
        # Durations are the emulated box's seconds (engine time_scale known), else the log's wall seconds.
        "time_scale": time_scale if modelled else None,
        # "status": no log was followed, the jobs are the daemon's /status polls' (see STATUS_JOBS).
        "job_source": "status" if model.jobs_from_status else "log",
        "jobs": entries,
        "counts": {key: counts.get(key, 0) for key in ("completed", "failed", "incomplete", "lost")},
        "phases": {
            "synthesis": _figures([s for p in partitions if (s := p.synth_s) is not None], scale),
            "scheduler_wait": _figures([s for j in jobs if (s := j.scheduler_wait_s) is not None], scale),
            "budget_wait": _figures([s for j in jobs if (s := j.budget_wait_s) is not None], scale),
            "gpu_queue_wait": _figures([s for p in partitions if (s := p.queue_wait_s) is not None], scale),
            "gpu": _figures([s for p in partitions if (s := p.gpu_s) is not None], scale),
        },
        "gpu": _gpu(timeline, scale),
        # The daemon's starts as its log shows them, and the runs the tool saw that it does not (SessionModel.runs).
        "daemon_runs": model.runs(),
        "restarts": max(0, model.runs() - 1),
        "exits": [
            {
                "t": e.t,
                "daemon_run": None if segment is None else run_number(segment),
                "cause": e.cause,
                "returncode": e.returncode,
                "signal": e.signal,
                "evidence": list(e.evidence),
            }
            for segment, e in model.exits
        ],
        # The session's last launch or attach that failed, unless a later one served (model.DaemonState).
        "start_failed": None if start_error is None else {"t": start_error.t, "text": start_error.text},
        "evictions": [{"t": t, "what": e.what, "srs": e.srs, "freed_gib": e.freed_gib} for t, e in model.evictions],
        "budget_stalls": [
            {"t": s.ts, "amount_gib": s.amount_gib, "total_gib": s.total_gib} for s in model.budget_stalls
        ],
        "warnings": [{"line": text, "count": n} for text, n in warnings.most_common()],
        "notices": [{"t": n.t, "level": n.level, "text": n.text} for n in model.notices if n.level != "info"],
    }


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def _utc(t: float) -> str:
    """A recorded wall time as the daemon's log stamps it (UTC), to the second."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def render_text(report: dict[str, Any]) -> str:
    """The report for a terminal: summary first, then the jobs that did not complete, then the rest."""
    counts = report["counts"]
    lines = [f"report of {report['source']}"]
    if report["time_scale"]:
        lines.append(
            f"(cuzk-engine run: durations below are the emulated box's seconds, the log's ÷ time_scale "
            f"{report['time_scale']:g})"
        )
    elif report["engine_time"]:
        lines.append(
            "(cuzk-engine run: durations below are this machine's seconds at the engine's time_scale, "
            "not the emulated box's: its config is not in a bare log)"
        )
    lines.append(
        f"jobs: {len(report['jobs'])}  completed {counts['completed']}  failed {counts['failed']}  "
        f"incomplete {counts['incomplete']}  lost {counts['lost']}   "
        f"daemon runs: {report['daemon_runs']} (restarts {report['restarts']})"
    )
    if report["job_source"] == "status":
        lines.append(STATUS_JOBS)
    for exit_event in report["exits"]:
        # Each names its run and its time: a session of benchmarks stops a daemon after each one, and
        # the same cause and evidence line after line said nothing of which.
        run = exit_event["daemon_run"]
        evidence = "; ".join(exit_event["evidence"])
        lines.append(
            f"daemon {'' if run is None else f'run {run} '}exited {_utc(exit_event['t'])}: {exit_event['cause']}"
            + (f" ({evidence})" if evidence else "")
        )
    if report["start_failed"] is not None:
        lines.append(f"daemon not started: {report['start_failed']['text']}")
    lines.append("")
    lines.append(f"{'phase':<16}{'n':>6}{'median':>12}{'p95':>12}")
    for name, fig in report["phases"].items():
        lines.append(
            f"{name.replace('_', ' '):<16}{fig['n']:>6}{_seconds(fig['median_s']):>12}{_seconds(fig['p95_s']):>12}"
        )
    gpu = report["gpu"]
    for worker, share in gpu["busy_share"].items():
        gaps = gpu["idle_gaps"].get(worker, [])
        longest = max((g["seconds"] for g in gaps), default=None)
        gap_text = f", {len(gaps)} idle gaps (longest {_seconds(longest)})" if gaps else ""
        on = f" on GPU{gpu['worker_gpu'][worker]}" if worker in gpu["worker_gpu"] else ""
        lines.append(f"GPU worker {worker}{on}: busy {share:.0%}{gap_text}")
    lines.append(f"evictions: {len(report['evictions'])}   budget stalls: {len(report['budget_stalls'])}")
    for stall in report["budget_stalls"][:1]:
        lines.append(
            f"  a {stall['amount_gib']} GiB reservation exceeds the {stall['total_gib']} GiB budget: it blocks forever"
        )
    lines.append("")
    lines.append("jobs:")
    # A benchmark's request ids repeat in the next one (porep-1000-1 each time): with more than one
    # daemon run, its jobs are listed under the run they were proved in.
    by_run = len({job["daemon_run"] for job in report["jobs"]}) > 1
    run = None
    for job in sorted(report["jobs"], key=lambda job: job["daemon_run"]) if by_run else report["jobs"]:
        if by_run and job["daemon_run"] != run:
            run = job["daemon_run"]
            lines.append(f"  daemon run {run}:")
        reason = f"  {job['reason']}" if job["reason"] else ""
        lines.append(f"{'    ' if by_run else '  '}{job['status']:<11}{job['job_id']}{reason}")
    if report["warnings"]:
        lines.append("")
        lines.append("warnings in the log:")
        for warning in report["warnings"]:
            lines.append(f"  {warning['count']:>5} x {warning['line']}")
    return "\n".join(lines) + "\n"
