"""What this machine can really give the daemon, and the knob values that follow from it.

The daemon's own sizing (``total_budget = "auto"`` = MemTotal − safety_margin) ignores the cgroup
limit of a container and budgets *reservations* (14 GiB per PoRep partition), while the kernel
kills on *RSS* (≈ 69 GiB + 20 GiB per concurrent partition, daemon_facts). The memcheck report
puts the two side by side; :func:`cgroup_aware_budget` is the budget that keeps the measured
peak under the memory really available; :func:`recommend` turns the machine's shape into knob
values with the reasoning in words and figures.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from .daemon_address import parse_address
from .daemon_config import config_from_values
from .daemon_facts import (
    DEFAULT_MAX_PARALLEL_SYNTHESIS,
    DEFAULT_SAFETY_MARGIN,
    DOCUMENTED_TIERS,
    KINDS,
    MEASURED_BASE_RSS,
    MEASURED_RSS_PER_PARTITION,
    PARTITION_BUDGET_UNIT,
    SUGGESTED_GPU_QUEUE_DEPTH,
    ProofKind,
    nominal_bytes,
    partitions_that_fit,
    peak_rss_estimate,
    worker_cap,
)
from .knob_rules import budget_floor_problem
from .knobs import knob
from .samplers import GpuDevice, GpuSampler
from .system import (
    CGROUP,
    PROC,
    CgroupMemory,
    cpu_count,
    cpu_quota,
    host_mem_total,
    memlock_limit,
    memory_cgroup_of,
)
from .units import GiB, UnitError, daemon_size, format_size, parse_size

POREP: Final = KINDS[ProofKind.POREP_SEAL_COMMIT]
SNAP: Final = KINDS[ProofKind.SNAP_DEALS_UPDATE]
WPOST: Final = KINDS[ProofKind.WINDOW_POST_PARTITION]
# What stays resident (budget-charged SRS, then PCE once extracted) per kind before any partition;
# a node proving PoRep and WindowPoSt holds both sets (~153 GiB).
RESIDENT_KINDS: Final = (POREP, SNAP, WPOST)
MIXED_RESIDENT: Final = sum(k.srs_bytes + k.pce_bytes for k in (POREP, WPOST))
# Upstream's throughput figures (cuzk-project.md, the Phase 9-12 sweeps: c=20 j=15, "c=15/38.2s,
# c=20/38.0s") were measured with 15-20 proofs in flight; 3 in flight measures latency instead.
DOCUMENTED_BENCH_CONCURRENCY: Final = 15
DOCUMENTED_BENCH_COUNT: Final = 20
# What a PoRep daemon holds before any partition: its SRS and, once extracted, its PCE.
BASE_RESERVATION: Final = POREP.srs_bytes + POREP.pce_bytes
# One pinned PoRep partition checks out three a/b/c buffers of 4,168,923,808 bytes (docs/daemon-interface.md §6.6).
PINNED_ABC_PER_PARTITION: Final = 3 * 4_168_923_808
# Partitions per GPU at which synthesis keeps a GPU busy enough for a second worker (docs/daemon-interface.md §3.10).
GPU_BUSY_PARTITIONS: Final = 10
RECOMMENDED_GPU_THREADS: Final = 32
# Cores one partition synthesis should have at least: the source's best value, 18 syntheses
# on a 64-core host, is ~3.6 cores each; fewer only adds contention.
CORES_PER_SYNTHESIS: Final = 4


def cgroup_aware_budget(effective_ram_bytes: int, margin_bytes: int = DEFAULT_SAFETY_MARGIN) -> int:
    """The ``total_budget`` that keeps the measured peak RSS under ``effective_ram_bytes``.

    SRS + PCE plus one 14 GiB reservation per partition that fits under the measured model
    (69 GiB + 20 GiB per partition, ``margin_bytes`` kept free), rounded up to whole GiB so it can
    be written as ``"<N>GiB"`` exactly (the rounding is < 1 GiB, never room for another partition);
    never more than the memory less the margin, even where SRS + PCE alone do not fit. Pass
    nominal bytes (real limit ÷ memory_scale) when the daemon is the engine.
    """
    exact = BASE_RESERVATION + PARTITION_BUDGET_UNIT * partitions_that_fit(effective_ram_bytes, margin_bytes)
    return min(math.ceil(exact / GiB), max(0, effective_ram_bytes - margin_bytes) // GiB) * GiB


def partitions_in_budget(budget_bytes: int, kind: ProofKind) -> int:
    """Concurrent partitions of ``kind`` a budget admits once that kind's SRS and PCE are resident."""
    facts = KINDS[kind]
    return max(0, (budget_bytes - facts.srs_bytes - facts.pce_bytes) // facts.full_reservation)


def auto_budget(host_mem_total_bytes: int, margin_bytes: int = DEFAULT_SAFETY_MARGIN) -> int:
    """What the daemon's ``total_budget = "auto"`` gives: MemTotal − safety_margin, cgroup ignored
    (config.rs MemoryConfig::resolve_total_budget, a saturating subtraction)."""
    return max(0, host_mem_total_bytes - margin_bytes)


# --------------------------------------------------------------------------------------------
# Knob recommendations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recommendation:
    section: str
    key: str
    value: int | str
    reasoning: str


def _tier_parallelism(ram_bytes: int) -> int | None:
    """max_parallel_synthesis read off the documented tiers, linear between them; None below the first."""
    gib = ram_bytes / GiB
    tiers = DOCUMENTED_TIERS
    if gib < tiers[0].ram_gib:
        return None
    for low, high in itertools.pairwise(tiers):
        if gib < high.ram_gib:
            share = (gib - low.ram_gib) / (high.ram_gib - low.ram_gib)
            return math.floor(
                low.max_parallel_synthesis + share * (high.max_parallel_synthesis - low.max_parallel_synthesis)
            )
    return tiers[-1].max_parallel_synthesis


def recommend(
    effective_ram_bytes: int, cpus: int, gpus: int, margin_bytes: int = DEFAULT_SAFETY_MARGIN
) -> list[Recommendation]:
    """Knob values for a machine of this shape, each with its reasoning."""
    gpus = max(1, gpus)  # the daemon falls back to GPU 0 when it finds none
    fit = partitions_that_fit(effective_ram_bytes, margin_bytes)
    budget = cgroup_aware_budget(effective_ram_bytes, margin_bytes)
    ram = format_size(effective_ram_bytes)
    tier = _tier_parallelism(effective_ram_bytes)
    cpu_cap = max(1, cpus // CORES_PER_SYNTHESIS)
    parallel = max(1, min(fit, cpu_cap, tier if tier is not None else fit))
    per_gpu = parallel / gpus
    busy = per_gpu >= GPU_BUSY_PARTITIONS

    if fit:
        budget_reason = (
            f"keeps the measured peak RSS ({format_size(MEASURED_BASE_RSS)} + "
            f"{format_size(MEASURED_RSS_PER_PARTITION)} per partition = {format_size(peak_rss_estimate(fit))} "
            f"at {fit} partitions) under {ram} with a {format_size(margin_bytes)} margin: "
            f"SRS + PCE {format_size(BASE_RESERVATION)} + {fit} × {format_size(PARTITION_BUDGET_UNIT)}"
        )
    else:
        # No peak is kept under the RAM here: say so, rather than a 69 GiB peak "under" 23.5 GiB.
        budget_reason = (
            f"all of {ram} less the {format_size(margin_bytes)} margin, and still too little: SRS + PCE and one "
            f"partition peak at {format_size(peak_rss_estimate(1))} under the measured model, and below PoRep's "
            f"budget floor ({format_size(POREP.budget_floor)}) a PoRep waits for memory for ever: expect OOM kills "
            "or a hang"
        )
    limits = [f"memory allows {fit}", f"{cpus} CPUs allow {cpu_cap} at {CORES_PER_SYNTHESIS} cores each"]
    if tier is not None:
        limits.append(f"the documented RAM tiers give {tier} (throughput stops improving past 12; 30 collapses)")
    parallel_reason = f"{parallel} = the smallest of: " + "; ".join(limits)
    if parallel >= DEFAULT_MAX_PARALLEL_SYNTHESIS:
        parallel_reason += f" (the daemon's default is {DEFAULT_MAX_PARALLEL_SYNTHESIS})"

    workers_reason = f"{per_gpu:g} concurrent partitions per GPU " + (
        f"≥ {GPU_BUSY_PARTITIONS}: synthesis keeps the GPU busy, so a second worker overlaps its CPU "
        "prep with the other's kernels (docs: ≈ +6 %; 3 or more is no better)"
        if busy
        else f"< {GPU_BUSY_PARTITIONS}: the GPU waits for synthesis, a second worker gains nothing"
    )
    queue = min(SUGGESTED_GPU_QUEUE_DEPTH, parallel) if busy else 0
    queue_reason = (
        f"synthesis outpaces the GPU; pacing to about {queue} waiting partitions keeps fewer "
        f"synthesized partitions (~16 GiB RSS each) parked in RAM (docs: 8 is a good start)"
        if busy
        else "the GPU is synthesis-starved, so pacing would only delay dispatch (0 = no pacing)"
    )
    split = busy and cpus > RECOMMENDED_GPU_THREADS
    gpu_threads = RECOMMENDED_GPU_THREADS if split else 0
    gpu_threads_reason = (
        f"under high concurrency a {RECOMMENDED_GPU_THREADS}-thread pool shrinks b_g2_msm buckets "
        "(~1.1 GiB → ~192 MB) and leaves cores to synthesis (docs: +3.4 %)"
        if split
        else "0 = all CPUs: at this concurrency prep_msm/b_g2_msm do not compete with synthesis for long"
    )
    synth_threads = cpus - RECOMMENDED_GPU_THREADS if split else 0
    synth_reason = (
        f"{cpus} CPUs split between synthesis ({synth_threads}) and the GPU pool ({RECOMMENDED_GPU_THREADS}), "
        "as the docs suggest when both run at once"
        if split
        else "0 = all available CPUs (the daemon's count respects affinity and cgroup quota)"
    )
    return [
        Recommendation("memory", "total_budget", f"{budget // GiB}GiB", budget_reason),
        Recommendation("pipeline", "max_parallel_synthesis", parallel, parallel_reason),
        Recommendation("gpus", "gpu_workers_per_device", 2 if busy else 1, workers_reason),
        Recommendation("pipeline", "max_gpu_queue_depth", queue, queue_reason),
        Recommendation("gpus", "gpu_threads", gpu_threads, gpu_threads_reason),
        Recommendation("synthesis", "threads", synth_threads, synth_reason),
    ]


# --------------------------------------------------------------------------------------------
# The memcheck report
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemcheckReport:
    machine: str  # "this machine", or the emulated box an engine stands for
    effective_ram_bytes: int
    host_mem_total_bytes: int
    cgroup_version: int | None
    cgroup_path: str | None
    cgroup_limit_bytes: int | None
    cgroup_usage_bytes: int | None
    safety_margin_bytes: int  # memory.safety_margin of the config checked, else the daemon's default
    auto_budget_bytes: int  # what total_budget = "auto" gives (cgroup ignored)
    recommended_budget_bytes: int  # cgroup_aware_budget(effective RAM)
    memlock_bytes: int | None  # None = unlimited
    max_porep_partitions: int  # concurrent, under the recommended budget and worker count
    max_snap_partitions: int
    suggested_bench_concurrency: int
    suggested_bench_count: int
    cpus: int
    cpu_quota: float | None
    gpus: tuple[GpuDevice, ...]
    gpu_state: str
    recommendations: tuple[Recommendation, ...]
    warnings: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["gpus"] = [asdict(g) for g in self.gpus]
        data["recommendations"] = [asdict(r) for r in self.recommendations]
        data["warnings"] = list(self.warnings)
        return data

    def fact_rows(self) -> list[tuple[str, str]]:
        """(label, value) for each figure, the ones that decide an OOM kill first (text and UI share them)."""

        def size(n: int | None, none: str) -> str:
            return none if n is None else format_size(n)

        cgroup = (
            f"v{self.cgroup_version} {self.cgroup_path}, limit {size(self.cgroup_limit_bytes, 'none')}, "
            f"usage {size(self.cgroup_usage_bytes, 'unknown')}"
            if self.cgroup_version is not None
            else "no memory cgroup"
        )
        quota = f", cgroup quota {self.cpu_quota:g} CPUs" if self.cpu_quota is not None else ""
        gpus = "; ".join(f"{g.index}: {g.name} ({size(g.total_bytes, '? memory')})" for g in self.gpus)
        resident = ", ".join(f"{k.title} {format_size(k.srs_bytes + k.pce_bytes)}" for k in RESIDENT_KINDS)
        return [
            ("machine", self.machine),
            ("effective RAM", format_size(self.effective_ram_bytes)),
            ("host MemTotal", format_size(self.host_mem_total_bytes)),
            ("cgroup", cgroup),
            (
                'budget "auto"',
                f"{format_size(self.auto_budget_bytes)} (MemTotal − safety_margin "
                f"{format_size(self.safety_margin_bytes)}; the daemon ignores the cgroup)",
            ),
            ("budget recommended", format_size(self.recommended_budget_bytes)),
            ("memlock limit", size(self.memlock_bytes, "unlimited")),
            (
                "resident SRS+PCE",
                f"{resident}; PoRep + WindowPoSt on one node {format_size(MIXED_RESIDENT)}",
            ),
            (
                "max partitions",
                f"PoRep {self.max_porep_partitions}, SnapDeals {self.max_snap_partitions} "
                "(concurrent, under the recommended budget and synthesis worker count)",
            ),
            (
                "bench concurrency",
                f"{self.suggested_bench_concurrency} proofs in flight, {self.suggested_bench_count} proofs "
                "(upstream's s/proof figures were measured at 15–20 in flight)",
            ),
            ("CPUs", f"{self.cpus}{quota}"),
            ("GPUs", self.gpu_state + (f": {gpus}" if gpus else "")),
        ]

    @property
    def auto_overshoots_cgroup(self) -> bool:
        """``total_budget = "auto"`` promises more than the cgroup allows (the classic OOM setup)."""
        return self.cgroup_limit_bytes is not None and self.auto_budget_bytes > self.cgroup_limit_bytes

    def render(self) -> str:
        """The report as text for a terminal."""
        lines = [f"{label:<20}{value}" for label, value in self.fact_rows()]
        lines += [
            "",
            "recommended knobs:",
        ]
        for r in self.recommendations:
            value = f'"{r.value}"' if isinstance(r.value, str) else str(r.value)
            lines.append(f"  [{r.section}] {r.key} = {value}")
            lines.append(f"      {r.reasoning}")
        if self.warnings:
            lines += ["", "warnings:", *(f"  ! {w}" for w in self.warnings)]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class EmulatedBox:
    """The machine a cuzk-engine stands for, in its nominal bytes: memcheck describes it, never the
    host the TUI runs on."""

    mem_total_bytes: int
    cgroup: CgroupMemory | None
    cpus: int
    gpus: tuple[GpuDevice, ...]


def engine_box(
    config: Mapping[str, Any],
    *,
    memory_limit_bytes: int | None = None,
    cgroup_path: str | None = None,
) -> EmulatedBox:
    """The box an engine with these effective config values emulates (read as the engine reads its
    ``[engine]`` section, :mod:`cuzktui.daemon_config`); ``memory_limit_bytes`` is its real cgroup
    limit, shown in the box's units."""
    typed = config_from_values(config)
    engine = typed.engine
    scale = engine.memory_scale
    cgroup = None
    if memory_limit_bytes is not None:
        limit = int(nominal_bytes(memory_limit_bytes, scale))
        cgroup = CgroupMemory(1, Path(cgroup_path or "(the engine's cgroup)"), limit, None, None)
    return EmulatedBox(
        mem_total_bytes=engine.mem_total,
        cgroup=cgroup,
        cpus=engine.cpus,
        gpus=tuple(GpuDevice(i, "cuzk-engine emulated GPU", engine.gpu_memory) for i in typed.emulated_gpus),
    )


def _configured_budget(config: Mapping[str, Any], host_mem_total_bytes: int, margin: int) -> tuple[int, str] | None:
    """(bytes, how it was read) of the checked config's total_budget, as the daemon resolves it."""
    budget = config.get("memory.total_budget")
    if not isinstance(budget, str):
        return None
    if budget == "auto":
        return auto_budget(host_mem_total_bytes, margin), '"auto" = MemTotal − safety_margin'
    try:
        return parse_size(budget), f'"{budget}"'
    except UnitError:
        return None  # config check reports it


def _margin(config: Mapping[str, Any]) -> int:
    margin = config.get("memory.safety_margin")
    try:
        return parse_size(margin) if isinstance(margin, str) else DEFAULT_SAFETY_MARGIN
    except UnitError:
        return daemon_size(str(margin))  # what the daemon would subtract; config check names the error


def make_report(
    *,
    host_mem_total_bytes: int,
    cgroup: CgroupMemory | None,
    memlock_bytes: int | None,
    cpus: int,
    cpu_quota: float | None,
    gpus: Sequence[GpuDevice],
    gpu_state: str,
    listen_addresses: Sequence[str] = (),
    config: Mapping[str, Any] | None = None,
    machine: str = "this machine",
) -> MemcheckReport:
    """The report from facts already gathered (see :func:`gather_report` for this machine).

    ``config`` holds the effective values of a config being checked (``"section.key"`` → value):
    its safety_margin, total_budget and pipeline mode are judged against these facts.
    """
    config = config or {}
    margin = _margin(config)
    limit = cgroup.limit_bytes if cgroup is not None else None
    effective = min(host_mem_total_bytes, limit) if limit is not None else host_mem_total_bytes
    auto = auto_budget(host_mem_total_bytes, margin)
    budget = cgroup_aware_budget(effective, margin)
    usable_cpus = min(cpus, math.ceil(cpu_quota)) if cpu_quota is not None else cpus
    # engine.rs detect_gpu_ordinals: the daemon proves on gpus.devices when set, else on every GPU found.
    devices = config_from_values(config).devices
    recommendations = recommend(effective, usable_cpus, len(devices) if devices else len(gpus), margin)
    parallel = next(r.value for r in recommendations if r.key == "max_parallel_synthesis")
    assert isinstance(parallel, int)
    workers = worker_cap(budget, parallel).workers
    warnings: list[str] = []
    if limit is not None and limit < host_mem_total_bytes:
        over = f"overshoots it by {format_size(auto - limit)}" if auto > limit else "still exceeds it at peak"
        warnings.append(
            f"cgroup limit {format_size(limit)} is below host RAM {format_size(host_mem_total_bytes)}: "
            f'total_budget = "auto" would budget {format_size(auto)} and {over}; '
            f'set total_budget = "{budget // GiB}GiB"'
        )
    if memlock_bytes is not None and memlock_bytes < PINNED_ABC_PER_PARTITION:
        warnings.append(
            f"memlock limit {format_size(memlock_bytes)} is below one partition's pinned a/b/c buffers "
            f"({format_size(PINNED_ABC_PER_PARTITION)}): CUDA pinned allocations may be refused and fall "
            "back to pageable memory (slower host→GPU copies); raise it (ulimit -l unlimited, "
            "docker --ulimit memlock=-1)"
        )
    if partitions_that_fit(effective, margin) == 0:
        warnings.append(
            f"{format_size(effective)} cannot hold a 32 GiB PoRep (SRS + PCE + one partition peaks at "
            f"{format_size(peak_rss_estimate(1))}): expect OOM kills"
        )
    warnings += _budget_warnings(config, host_mem_total_bytes, margin, budget)
    for address in listen_addresses:
        parsed = parse_address(address)
        if parsed is not None and parsed.every_interface:
            warnings.append(
                f"the daemon listens on {address}: every interface, with no TLS and no authentication; "
                "bind 127.0.0.1 or a unix socket unless the network is trusted"
            )
    return MemcheckReport(
        machine=machine,
        effective_ram_bytes=effective,
        host_mem_total_bytes=host_mem_total_bytes,
        cgroup_version=cgroup.version if cgroup is not None else None,
        cgroup_path=str(cgroup.path) if cgroup is not None else None,
        cgroup_limit_bytes=limit,
        cgroup_usage_bytes=cgroup.usage_bytes if cgroup is not None else None,
        safety_margin_bytes=margin,
        auto_budget_bytes=auto,
        recommended_budget_bytes=budget,
        memlock_bytes=memlock_bytes,
        max_porep_partitions=min(partitions_in_budget(budget, ProofKind.POREP_SEAL_COMMIT), workers),
        max_snap_partitions=min(partitions_in_budget(budget, ProofKind.SNAP_DEALS_UPDATE), workers),
        suggested_bench_concurrency=DOCUMENTED_BENCH_CONCURRENCY,
        suggested_bench_count=DOCUMENTED_BENCH_COUNT,
        cpus=cpus,
        cpu_quota=cpu_quota,
        gpus=tuple(gpus),
        gpu_state=gpu_state,
        recommendations=tuple(recommendations),
        warnings=tuple(warnings),
    )


def _budget_warnings(config: Mapping[str, Any], host_mem_total_bytes: int, margin: int, recommended: int) -> list[str]:
    """The checked config's budget against each kind's floor (as ``config check`` says it, "auto"
    resolved on this machine), and the residency of a mixed PoRep + WindowPoSt node."""
    if config.get("pipeline.enabled", True) is False:
        return []  # the monolithic path reserves no budget (engine.rs): no floor applies
    configured = _configured_budget(config, host_mem_total_bytes, margin)
    warnings: list[str] = []
    if configured is not None:
        problem = budget_floor_problem(configured[0])
        if problem is not None:
            warnings.append(f"configured total_budget {configured[1]}: {problem.message}")
    budget = configured[0] if configured is not None else recommended
    if WPOST.budget_floor <= budget < MIXED_RESIDENT + PARTITION_BUDGET_UNIT:
        idle = config.get("memory.eviction_min_idle", knob("memory.eviction_min_idle").default)
        warnings.append(
            f"PoRep and WindowPoSt on one node keep {format_size(MIXED_RESIDENT)} resident (both SRS and PCE) "
            f"before any partition; a {format_size(budget)} budget cannot hold both, so a WindowPoSt waits until "
            f"PoRep's SRS has sat idle for memory.eviction_min_idle ({idle}) and is evicted (reloaded on the next "
            'PoRep): on a mixed node lower eviction_min_idle (e.g. "30s") or prove WindowPoSt elsewhere'
        )
    return warnings


def gather_report(
    *,
    pid: int | str = "self",
    proc_root: Path = PROC,
    cgroup_root: Path = CGROUP,
    listen_addresses: Sequence[str] = (),
    config: Mapping[str, Any] | None = None,
    box: EmulatedBox | None = None,
    nvml: Any = None,
) -> MemcheckReport:
    """The memcheck report for this machine, or for the ``box`` an engine emulates (blocking:
    reads /proc, cgroups and NVML)."""
    if box is not None:
        return make_report(
            host_mem_total_bytes=box.mem_total_bytes,
            cgroup=box.cgroup,
            memlock_bytes=None,  # the engine pins nothing: the host's limit says nothing about the box
            cpus=box.cpus,
            cpu_quota=None,
            gpus=box.gpus,
            gpu_state=f"{len(box.gpus)} emulated by cuzk-engine",
            listen_addresses=listen_addresses,
            config=config,
            machine=f"the {format_size(box.mem_total_bytes)} box cuzk-engine emulates (not this host)",
        )
    gpu = GpuSampler(nvml=nvml)
    try:
        devices, state = list(gpu.devices), gpu.state
    finally:
        gpu.close()
    return make_report(
        host_mem_total_bytes=host_mem_total(proc_root),
        cgroup=memory_cgroup_of(pid, proc_root=proc_root, cgroup_root=cgroup_root),
        memlock_bytes=memlock_limit(),
        cpus=cpu_count(),
        cpu_quota=cpu_quota(pid, proc_root=proc_root, cgroup_root=cgroup_root),
        gpus=devices,
        gpu_state=state,
        listen_addresses=listen_addresses,
        config=config,
    )


def memcheck_for(
    config: Mapping[str, Any],
    *,
    engine: bool,
    memory_limit_bytes: int | None = None,
    cgroup_path: str | None = None,
) -> MemcheckReport:
    """The memcheck report for a daemon run with these effective config values: for cuzk-engine the
    box it emulates (with its cgroup, ``memory_limit_bytes`` real bytes), else this machine."""
    listen = [str(config[k]) for k in ("daemon.listen", "daemon.status_listen") if config.get(k)]
    if not engine:
        return gather_report(listen_addresses=listen, config=config)
    box = engine_box(config, memory_limit_bytes=memory_limit_bytes, cgroup_path=cgroup_path)
    return gather_report(listen_addresses=listen, config=config, box=box)
