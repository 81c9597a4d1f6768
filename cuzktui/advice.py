"""The dashboard's "next knob" hints: what the session's numbers suggest turning next.

Each hint names the real config key and points the way upstream's code says the knob works
(engine.rs Engine::start): ``pipeline.max_gpu_queue_depth = 0`` means *no* pacing, so when
synthesis outruns the GPU and memory is short the advice is to set it, never to lower it; the
synthesis worker count is ``max(2, min(total_budget / 14 GiB, max_parallel_synthesis))``, so
raising ``pipeline.max_parallel_synthesis`` is suggested only when it, not the budget, is the cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .daemon_facts import (
    DEFAULT_MAX_PARALLEL_SYNTHESIS,
    PARTITION_BUDGET_UNIT,
    SUGGESTED_GPU_QUEUE_DEPTH,
    SYNTHESIZED_PARTITION_RSS,
    WorkerCap,
    worker_cap,
)
from .model import SessionModel
from .units import GiB, format_size

# RSS above this share of the cgroup limit means memory, not CPU or GPU, decides what comes next.
MEMORY_TIGHT_SHARE: Final = 0.9
# More synthesized partitions waiting than this many per GPU worker: synthesis outruns the GPU.
WAITING_PER_GPU_WORKER: Final = 2


def _int(config: Mapping[str, Any], name: str, default: int) -> int:
    value = config.get(name, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def knob_hints(model: SessionModel, config: Mapping[str, Any]) -> list[str]:
    """Hints for the session in ``model`` under the running config's effective ``config`` values
    (``"section.key"`` → value; empty when the running config is unknown, as for an attached daemon)."""
    hints: list[str] = []
    limit_point = model.cgroup_limit.last()
    limit = limit_point[1] if limit_point else None
    budget_point = model.budget_total.last()
    rss_peak = model.rss.peak()
    memory_tight = bool(model.oom_kills) or bool(limit and rss_peak and rss_peak > MEMORY_TIGHT_SHARE * limit)
    if model.oom_kills:
        hints.append(
            "OOM-killed: the daemon budgets reservations, not RSS, and ignores the cgroup limit; set "
            "memory.total_budget below the limit (memcheck gives a value) or lower pipeline.max_parallel_synthesis"
        )
    if limit and budget_point and budget_point[1] > limit:
        hints.append(
            f"budget {format_size(budget_point[1])} exceeds the cgroup limit {format_size(limit)}: "
            "set memory.total_budget explicitly"
        )
    if config.get("pipeline.enabled", True) is False:
        return hints  # monolithic mode: no synthesis workers, no pacer, nothing in /status to read
    queue_depth = _int(config, "pipeline.max_gpu_queue_depth", 0)
    status = model.status
    gpu_bound = bool(
        status is not None
        and status.gpu_workers_total
        and status.partitions_waiting_gpu > WAITING_PER_GPU_WORKER * status.gpu_workers_total
    )
    if gpu_bound and memory_tight and queue_depth == 0:
        assert status is not None
        hints.append(
            f"synthesis outruns the GPU ({status.partitions_waiting_gpu} synthesized partitions waiting, "
            f"~{format_size(SYNTHESIZED_PARTITION_RSS)} RSS each) and memory is the limit: set "
            f"pipeline.max_gpu_queue_depth = {SUGGESTED_GPU_QUEUE_DEPTH} (0 means no pacing; upstream's docs "
            f"suggest {SUGGESTED_GPU_QUEUE_DEPTH})"
        )
    elif memory_tight and not model.oom_kills and limit and rss_peak:
        hints.append(
            f"RSS peaked at {rss_peak / limit:.0%} of the cgroup limit: lower pipeline.max_parallel_synthesis"
            + ("" if queue_depth else f" or set pipeline.max_gpu_queue_depth = {SUGGESTED_GPU_QUEUE_DEPTH} (pacing)")
        )
    elif gpu_bound:
        hints.append(
            "the GPU is the bottleneck: more synthesis would only park partitions in RAM; "
            "pipeline.max_parallel_synthesis is not what limits throughput"
        )
    budget_gib = model.daemon.budget_total_gib
    if status is not None and status.gpu_workers_busy < status.gpu_workers_total and budget_gib is not None:
        cap = worker_cap(
            budget_gib * GiB, _int(config, "pipeline.max_parallel_synthesis", DEFAULT_MAX_PARALLEL_SYNTHESIS)
        )
        workers = model.daemon.synth_worker_count or cap.workers
        if status.synthesizing >= workers and not gpu_bound:
            hints.append(_starved_hint(cap, workers, memory_tight))
    return hints


def _starved_hint(cap: WorkerCap, workers: int, memory_tight: bool) -> str:
    if cap.budget_is_cap:
        return (
            f"GPU starved by synthesis: all {workers} synthesis workers busy, and the budget is the cap "
            f"({cap.budget_workers} × {format_size(PARTITION_BUDGET_UNIT)}; pipeline.max_parallel_synthesis = "
            f"{cap.max_parallel} is not reached): raise memory.total_budget"
            + (" only where RAM allows; it is already tight" if memory_tight else " if RAM allows")
        )
    return (
        f"GPU starved by synthesis: all {workers} synthesis workers busy and pipeline.max_parallel_synthesis "
        f"= {cap.max_parallel} is the cap (the budget admits {cap.budget_workers}): raise it"
        + (", but memory is already tight" if memory_tight else " if cores allow")
    )
