"""Read-only views of the engine: Prometheus text (docs/daemon-interface.md §7) and the /status JSON (§5)."""

from __future__ import annotations

import json
import time
from typing import Any

from cuzktui.daemon_facts import BY_DISPLAY, STATUS_MAX_CONCURRENT_UNIT

from .pipeline import Engine

_HELP = {
    "cuzk_proofs_completed_total": ("Total proofs completed", "counter"),
    "cuzk_proofs_failed_total": ("Total proofs failed", "counter"),
    "cuzk_uptime_seconds": ("Daemon uptime", "gauge"),
    "cuzk_queue_depth": ("Current queue depth", "gauge"),
    "cuzk_proofs_completed": ("Per proof-kind completions", "counter"),
    "cuzk_proofs_failed": ("Per proof-kind failures", "counter"),
    "cuzk_proof_duration_seconds": ("Proof duration", "summary"),
    "cuzk_running_jobs": ("Currently running proofs", "gauge"),
    "cuzk_gpu_workers": ("Number of GPU workers", "gauge"),
}


def _label(display: str) -> str:
    return f'{{proof_kind="{BY_DISPLAY[display].metric_label}"}}'


def metrics_text(engine: Engine) -> str:
    c = engine.counters
    lines: list[str] = []

    def family(name: str, samples: list[str]) -> None:
        help_text, kind = _HELP[name]
        lines.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples])

    family("cuzk_proofs_completed_total", [f"cuzk_proofs_completed_total {c.completed}"])
    family("cuzk_proofs_failed_total", [f"cuzk_proofs_failed_total {c.failed}"])
    family("cuzk_uptime_seconds", [f"cuzk_uptime_seconds {int(engine.uptime())}"])
    family("cuzk_queue_depth", [f"cuzk_queue_depth {len(engine.scheduler)}"])
    family("cuzk_proofs_completed", [f"cuzk_proofs_completed{_label(k)} {n}" for k, n in c.completed_by_kind.items()])
    family("cuzk_proofs_failed", [f"cuzk_proofs_failed{_label(k)} {n}" for k, n in c.failed_by_kind.items()])
    durations = [(k, window) for k, window in c.durations.items() if window]
    if durations:
        samples: list[str] = []
        for kind, window in durations:
            samples.append(f"cuzk_proof_duration_seconds_count{_label(kind)} {len(window)}")
            samples.append(f"cuzk_proof_duration_seconds_sum{_label(kind)} {sum(window):.3f}")
        family("cuzk_proof_duration_seconds", samples)
    running = sum(1 for w in engine.workers if w.job is not None)
    family("cuzk_running_jobs", [f"cuzk_running_jobs {running}"])
    family("cuzk_gpu_workers", [f"cuzk_gpu_workers {len(engine.workers)}"])
    return "\n".join(lines) + "\n"


def _secs(since: float | None, now: float) -> float | None:
    return None if since is None else now - since


def status_document(engine: Engine) -> dict[str, Any]:
    """The /status JSON object; dict order is the daemon's key order."""
    engine.prune_pipelines()
    now = time.monotonic()
    budget = engine.budget
    pipelines = []
    for job in engine.pipelines.values():
        partitions = []
        for part in job.partitions:
            synth_ms = part.synth_ms
            if synth_ms is None and part.synth_started is not None:
                synth_ms = int((now - part.synth_started) * 1000)
            gpu_ms = part.gpu_ms
            if gpu_ms is None and part.gpu_started is not None:
                gpu_ms = int((now - part.gpu_started) * 1000)
            partitions.append({"index": part.index, "state": part.state.value, "synth_ms": synth_ms, "gpu_ms": gpu_ms})
        pipelines.append(
            {
                "job_id": job.job_id,
                "proof_kind": job.facts.display,
                "started_secs_ago": _secs(job.split_at, now) or 0.0,
                "total_partitions": len(job.partitions),
                "partitions_done": job.done_count,
                "partitions": partitions,
            }
        )
    # status.rs GpuWorkerState: only partitions mark a worker busy, so monolithic work shows "idle".
    workers = [
        {
            "worker_id": w.worker_id,
            "gpu_ordinal": w.gpu,
            "state": "idle" if w.status_job is None else "proving",
            "current_job": w.status_job,
            "current_partition": w.partition,
            "busy_secs": _secs(w.busy_since, now),
        }
        for w in engine.workers
    ]

    def allocations(table: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "circuit_id": entry.circuit_id,
                "bytes": entry.size,
                "last_used_secs_ago": 0.0 if entry.refcount > 0 else now - entry.last_used,
                "evictable": entry.refcount == 0,
            }
            for entry in table.values()
        ]

    c = engine.counters
    b = engine.buffers
    return {
        "uptime_secs": engine.uptime(),
        "memory": {"total_bytes": budget.total, "used_bytes": budget.used, "available_bytes": budget.available},
        "synthesis": {"max_concurrent": budget.total // STATUS_MAX_CONCURRENT_UNIT, "active": engine.synth_active},
        "pipelines": pipelines,
        "gpu_workers": workers,
        "allocations": {"srs": allocations(engine.residency.srs), "pce": allocations(engine.residency.pce)},
        "counters": {
            "total_completed": c.status_completed,
            "total_failed": c.status_failed,
            "completed_by_kind": dict(c.status_completed_by_kind),
            "failed_by_kind": dict(c.status_failed_by_kind),
            "queue_depth": len(engine.scheduler),
        },
        "buffers": {
            "synth_in_flight": b["synth"],
            "provers_in_flight": b["provers"],
            "aux_in_flight": b["aux"],
            "shells_in_flight": b["shells"],
            "pending_handles": b["pending"],
        },
        # cuzk-engine's own (the daemon has none): the box it emulates, and that box's RSS (the
        # model's allocations and the daemon's process, in the box's bytes), which the tool shows
        # as the daemon's RSS instead of its own process's; its scales let a client that attached
        # (and never read the config) show figures in the box's bytes and time, and find the kernel's
        # word on an OOM kill of the box process (--box-cgroup; null when the memory is this process's).
        "emulated_box": {
            "ram_bytes": engine.config.engine.mem_total,
            "gpus": len(engine.devices),
            "memory_scale": engine.config.engine.memory_scale,
            "time_scale": engine.config.engine.time_scale,
            "box_pid": engine.arena.memory.pid,
            "rss_bytes": engine.box_rss,
        },
    }


def status_json(engine: Engine) -> str:
    return json.dumps(status_document(engine), separators=(",", ":"))
