"""Proof requests, jobs and their per-partition progress, independent of the wire format."""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from cuzktui.daemon_facts import KINDS, KindFacts, ProofKind

if TYPE_CHECKING:
    from .inputs import InputSummary, Parsed

# Priority names as the daemon's Debug prints them; 0 = the kind's default, ≥5 = Normal.
PRIORITY_NAMES = {1: "Low", 2: "Normal", 3: "High", 4: "Critical"}
DEFAULT_PRIORITY = {
    ProofKind.POREP_SEAL_COMMIT: 2,
    ProofKind.SNAP_DEALS_UPDATE: 2,
    ProofKind.WINDOW_POST_PARTITION: 3,
    ProofKind.WINNING_POST: 4,
}


@dataclass(slots=True)
class ProofRequest:
    request_id: str
    kind: ProofKind
    priority: int = 0
    registered_proof: int = 0
    sector_size: int = 0
    vanilla_proof: bytes = b""
    vanilla_proofs: list[bytes] = field(default_factory=list)
    sector_number: int = 0
    miner_id: int = 0
    randomness: bytes = b""
    partition_index: int = 0
    comm_r_old: bytes = b""
    comm_r_new: bytes = b""
    comm_d_new: bytes = b""

    def effective_priority(self) -> int:
        if self.priority == 0:
            return DEFAULT_PRIORITY[self.kind]
        return self.priority if self.priority in PRIORITY_NAMES else 2


def partition_proof(digest: bytes, partition: int) -> bytes:
    return hashlib.shake_256(digest + partition.to_bytes(4, "little")).digest(192)


class Status(Enum):
    COMPLETED = 1
    FAILED = 2


@dataclass(frozen=True, slots=True)
class JobResult:
    status: Status
    proof: bytes = b""
    error: str = ""
    queue_wait_ms: int = 0
    synthesis_ms: int = 0
    gpu_ms: int = 0
    total_ms: int = 0


class PartState(Enum):
    PENDING = "pending"
    SYNTHESIZING = "synthesizing"
    SYNTH_DONE = "synth_done"
    GPU = "gpu"
    DONE = "done"
    FAILED = "failed"


@dataclass(slots=True)
class Partition:
    index: int
    state: PartState = PartState.PENDING
    synth_started: float | None = None
    synth_ms: int | None = None
    gpu_started: float | None = None
    gpu_ms: int | None = None


@dataclass(eq=False, slots=True)
class Job:
    request: ProofRequest
    job_id: str
    arrival: int
    future: asyncio.Future[JobResult]
    submitted: float = field(default_factory=time.monotonic)
    digest: bytes = b""
    job_seq: int | None = None
    split_at: float | None = None
    partitions: list[Partition] = field(default_factory=list)
    failed: bool = False
    holds_srs: bool = False  # a reference on its circuit's SRS, dropped when the job ends
    completed_at: float | None = None  # when status.rs job_completed was told (partitioned only)
    # Partition proofs the parsed input holds (None: all the circuit needs); a partition beyond
    # them fails its synthesis as upstream's does.
    vanilla_partitions: int | None = None
    # The input read on arrival, off the event loop (the payload is dropped then); ``input`` once awaited.
    reading: asyncio.Future[InputSummary] | None = None
    input_size: int = 0  # bytes of the payload (the modelled parse takes longer for more)
    input: InputSummary | None = None
    parsed: Parsed | None = None  # the input as checked on the job's path

    @property
    def facts(self) -> KindFacts:
        return KINDS[self.request.kind]

    @property
    def done_count(self) -> int:
        return sum(1 for p in self.partitions if p.state is PartState.DONE)


def ms_since(start: float) -> int:
    return int((time.monotonic() - start) * 1000)


def rust_duration(seconds: float) -> str:
    """Rust's Debug of a Duration: ``44.601276305s``, ``580.123456ms``, ``52.1µs``."""
    nanos = round(seconds * 1e9)
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("µs", 10**3)):
        if nanos >= scale:
            whole, frac = divmod(nanos, scale)
            digits = len(str(scale)) - 1
            frac_text = f"{frac:0{digits}d}".rstrip("0")
            return f"{whole}.{frac_text}{unit}" if frac_text else f"{whole}{unit}"
    return f"{nanos}ns"
