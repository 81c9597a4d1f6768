"""/status bodies as upstream's status.rs ``StatusSnapshot`` serialises them, field for field."""

from __future__ import annotations

from typing import Any


def partition(index: int, state: str, synth_ms: int | None = None, gpu_ms: int | None = None) -> dict[str, Any]:
    return {"index": index, "state": state, "synth_ms": synth_ms, "gpu_ms": gpu_ms}


def pipeline(job_id: str, partitions: list[dict[str, Any]], started_secs_ago: float = 12.5) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "proof_kind": "porep-c2",
        "started_secs_ago": started_secs_ago,
        "total_partitions": len(partitions),
        "partitions_done": sum(p["state"] == "done" for p in partitions),
        "partitions": partitions,
    }


def status_body(pipelines: list[dict[str, Any]], *, active: int = 0, queue_depth: int = 0) -> dict[str, Any]:
    """A /status body as status.rs serialises it."""
    gib = 1 << 30
    return {
        "uptime_secs": 3600.0,
        "memory": {"total_bytes": 400 * gib, "used_bytes": 70 * gib, "available_bytes": 330 * gib},
        "synthesis": {"max_concurrent": 44, "active": active},
        "pipelines": pipelines,
        "gpu_workers": [
            {
                "worker_id": 0,
                "gpu_ordinal": 0,
                "state": "idle",
                "current_job": None,
                "current_partition": None,
                "busy_secs": None,
            },
        ],
        "allocations": {"srs": [], "pce": []},
        "counters": {
            "total_completed": 3,
            "total_failed": 1,
            "completed_by_kind": {"porep-c2": 3},
            "failed_by_kind": {},
            "queue_depth": queue_depth,
        },
        "buffers": {
            "synth_in_flight": 0,
            "provers_in_flight": 0,
            "aux_in_flight": 0,
            "shells_in_flight": 0,
            "pending_handles": 0,
        },
    }
