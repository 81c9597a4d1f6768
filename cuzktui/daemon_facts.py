"""Facts about the real cuzk daemon that several parts of the tool rely on.

One table for the engine (which imitates the daemon), the planner (which recommends knobs) and
the UI (which names proof kinds): proof kinds and their names, partitions per proof, the
budget reservations of docs/daemon-interface.md §6.2, SRS / PCE sizes, and the measured RSS figures that make
the difference between the *budget* (reservations) and what the kernel actually sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from .units import GiB, MiB


class ProofKind(IntEnum):
    """The wire enum ``cuzk.v1.ProofKind``."""

    POREP_SEAL_COMMIT = 1
    SNAP_DEALS_UPDATE = 2
    WINDOW_POST_PARTITION = 3
    WINNING_POST = 4


@dataclass(frozen=True, slots=True)
class KindFacts:
    kind: ProofKind
    cli_name: str  # cuzk-bench's -t value and ours
    display: str  # the engine's display string (logs, queues, status JSON)
    metric_label: str  # Prometheus proof_kind label
    circuit_id: str  # SRS circuit id in pipeline mode
    partitions: int  # partitions per proof; 1 = monolithic
    full_reservation: int  # bytes reserved at dispatch, per partition (or per job when monolithic)
    abc_release: int  # bytes released when the GPU prove starts
    srs_bytes: int  # SRS size (pinned host memory, charged to the budget)
    pce_bytes: int  # PCE in-memory size (charged once extracted)
    title: str  # how operators and upstream's docs name the kind in prose
    proof_bytes_per_partition: int = 192

    @property
    def monolithic(self) -> bool:
        return self.partitions == 1

    @property
    def finalize_release(self) -> int:
        return self.full_reservation - self.abc_release

    @property
    def budget_floor(self) -> int:
        """The smallest pipeline-mode ``total_budget`` that can ever prove this kind.

        The SRS file size is acquired from the budget before the first partition and stays charged
        for as long as any proof holds the SRS (srs_manager.rs ensure_loaded / evict: evictable only
        when idle); each partition then acquires its reservation (memory.rs proof_kind_full_bytes,
        engine.rs synthesis dispatch). Below this sum the acquire waits forever.
        """
        return self.srs_bytes + self.full_reservation


KINDS: Final[dict[ProofKind, KindFacts]] = {
    ProofKind.POREP_SEAL_COMMIT: KindFacts(
        ProofKind.POREP_SEAL_COMMIT, "porep", "porep-c2", "porep_c2", "porep-32g", 10, 14 * GiB, 13 * GiB,
        44 * GiB, 25 * GiB + 700 * MiB, "PoRep",
    ),
    ProofKind.SNAP_DEALS_UPDATE: KindFacts(
        ProofKind.SNAP_DEALS_UPDATE, "snap", "snap-update", "snap_update", "snap-32g", 16, 9 * GiB, 8 * GiB,
        33 * GiB, 17 * GiB, "SnapDeals",
    ),
    ProofKind.WINDOW_POST_PARTITION: KindFacts(
        ProofKind.WINDOW_POST_PARTITION, "wpost", "window-post", "window_post", "wpost-32g", 1, 14 * GiB, 13 * GiB,
        57 * GiB, 26 * GiB, "WindowPoSt",
    ),
    ProofKind.WINNING_POST: KindFacts(
        ProofKind.WINNING_POST, "winning", "winning-post", "winning_post", "winning-32g", 1, GiB // 2, GiB // 4,
        184 * MiB, 400 * MiB, "WinningPoSt",
    ),
}  # fmt: skip

BY_CLI_NAME: Final[dict[str, KindFacts]] = {k.cli_name: k for k in KINDS.values()}
BY_DISPLAY: Final[dict[str, KindFacts]] = {k.display: k for k in KINDS.values()}
# The names a user types (`--kind`, `--run-bench KIND:…`, the Bench screen), in wire-enum order.
CLI_KINDS: Final[tuple[str, ...]] = tuple(BY_CLI_NAME)
# Every name ``cuzk-bench -t`` accepts (cuzk-bench main.rs proof_kind_from_str) → ours.
CUZK_BENCH_KINDS: Final[dict[str, str]] = {
    **{name: "porep" for name in ("porep", "porep-c2", "seal-commit")},
    **{name: "snap" for name in ("snap", "snap-deals", "update")},
    **{name: "wpost" for name in ("wpost", "window-post", "windowpost")},
    **{name: "winning" for name in ("winning", "winning-post", "winningpost")},
}

# The budget's unit of admission: the daemon sizes its synthesis workers as budget // 14 GiB
# whatever the workload (docs/daemon-interface.md §3.10).
PARTITION_BUDGET_UNIT: Final = 14 * GiB
DEFAULT_MAX_PARALLEL_SYNTHESIS: Final = 18
# /status reports synthesis.max_concurrent as budget // 9 GiB (unrelated to the configured limit).
STATUS_MAX_CONCURRENT_UNIT: Final = 9 * GiB
# config.rs PipelineConfig::max_gpu_queue_depth: 0 = no pacing (the default), "8 = recommended starting point".
SUGGESTED_GPU_QUEUE_DEPTH: Final = 8
PCE_EXTRACTION_TRANSIENT: Final = 14 * GiB
# A batch of two or more PoRep requests (scheduler.max_batch_size > 1) reserves a flat 136 GiB
# whatever its size, before the SRS (memory.rs POREP_BATCH_FULL_BYTES, engine.rs batch path).
POREP_BATCH_RESERVATION: Final = 136 * GiB

# Measured resident memory (docs/daemon-interface.md §3.10, §6.2): peak RSS ≈ 69 GiB + 20 GiB per concurrent
# PoRep partition. The 69 GiB base is the SRS (44) plus the PCE (~25); a synthesized partition
# holds ≈ 16 GiB (a/b/c ≈ 3 × 4.17 GiB + 4 GiB aux), ≈ 4 GiB once a/b/c are freed. The 20 GiB
# slope is higher than the 14 GiB reservation: that gap is why a budget equal to the memory
# limit still gets the daemon OOM-killed.
MEASURED_BASE_RSS: Final = 69 * GiB
MEASURED_RSS_PER_PARTITION: Final = 20 * GiB
SYNTHESIZED_PARTITION_RSS: Final = 16 * GiB
PARTITION_RSS_AFTER_ABC_FREE: Final = 4 * GiB
DEFAULT_SAFETY_MARGIN: Final = 5 * GiB
# The daemon's process itself, besides the memory the figures above count: its idle RSS on an H200
# with a 2 KiB-sector SRS loaded was 191–482 MiB (docs/daemon-interface.md §6.7); the lower end, as
# it idles after its start. cuzk-engine shows its box's RSS as this plus the model's allocations.
DAEMON_PROCESS_RSS: Final = 191 * MiB

# Documented figures (docs/daemon-interface.md §9.4) the engine's time model is built from.
POREP_PARTITION_SYNTH_S: Final = 29.0  # one partition with the cores to itself
POREP_PARTITION_GPU_S: Final = 3.0  # per partition under the per-GPU mutex
SRS_LOAD_BYTES_PER_S: Final = 3 * GiB  # ≈ 15 s for the 44 GiB PoRep SRS, cold


@dataclass(frozen=True, slots=True)
class WorkerCap:
    """Which bound sets the synthesis worker count (engine.rs: max(2, min(budget / 14 GiB, max_parallel)))."""

    workers: int
    budget_workers: int
    max_parallel: int

    @property
    def budget_is_cap(self) -> bool:
        return self.budget_workers <= self.max_parallel


def worker_cap(budget_bytes: int, max_parallel_synthesis: int) -> WorkerCap:
    """The daemon's synthesis worker count for a budget and ``pipeline.max_parallel_synthesis`` (0 = 18)."""
    max_parallel = max_parallel_synthesis or DEFAULT_MAX_PARALLEL_SYNTHESIS
    budget_workers = budget_bytes // PARTITION_BUDGET_UNIT
    return WorkerCap(max(2, min(budget_workers, max_parallel)), budget_workers, max_parallel)


@dataclass(frozen=True, slots=True)
class RamTier:
    """A documented RAM tier (older partition_workers naming = today's max_parallel_synthesis)."""

    ram_gib: int
    max_parallel_synthesis: int
    gpu_workers_per_device: int
    seconds_per_proof: float
    peak_rss_gib: int


DOCUMENTED_TIERS: Final[tuple[RamTier, ...]] = (
    RamTier(128, 2, 1, 152.0, 110),
    RamTier(256, 7, 1, 53.0, 208),
    RamTier(384, 10, 2, 42.5, 271),
    RamTier(512, 12, 2, 42.5, 373),
)


def nominal_bytes(real_bytes: int, memory_scale: float | None) -> float:
    """Real bytes of an engine (``[engine] memory_scale`` real bytes per nominal byte) in the units of
    the box it emulates, where its budget and the operator's thinking live; a real daemon's as they are."""
    return real_bytes / memory_scale if memory_scale else float(real_bytes)


def peak_rss_estimate(concurrent_partitions: int) -> int:
    """Peak daemon RSS in bytes for PoRep at this many concurrent partitions (measured model)."""
    return MEASURED_BASE_RSS + MEASURED_RSS_PER_PARTITION * concurrent_partitions


def partitions_that_fit(memory_bytes: int, margin_bytes: int = DEFAULT_SAFETY_MARGIN) -> int:
    """How many concurrent PoRep partitions keep the measured peak RSS under memory minus margin."""
    room = memory_bytes - margin_bytes - MEASURED_BASE_RSS
    return max(0, room // MEASURED_RSS_PER_PARTITION)
