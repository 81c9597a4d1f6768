"""SRS and PCE residency: load on first use, charged to the budget, evicted only when idle.

docs/daemon-interface.md §6.1, §6.4, §6.5. PCE is extracted in the background after the first proof of a kind
and then kept resident, but, as in the daemon (§0.8), synthesis never uses it.

Memory of an extraction: the budget holds the 14 GiB transient from before the extraction until
the PCE is cached (after its permanent reservation and the disk save), as the daemon does. The
real memory behind that transient is the extraction's working set (the RecordingCS run over one
circuit); it lives only while the extraction runs: ``extract_precompiled_circuit`` returns the
PCE and drops the recording constraint system before ``PceCache::insert_blocking`` acquires the
permanent amount and writes the file. So the engine frees the working set when the extraction
returns and maps the PCE (its in-memory size) then; the two never overlap, and the budget
reservation outlives the real memory by the save.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cuzktui import daemon_messages as msg
from cuzktui.daemon_facts import KINDS, PCE_EXTRACTION_TRANSIENT, KindFacts, ProofKind
from cuzktui.units import GiB

from . import timemodel, tracing
from .memory import Arena, Block, Budget, Reservation, gib
from .timemodel import Clock, CpuPool
from .tracing import Logger, Quoted

# Every circuit id PreloadSRS accepts, with its params file (docs/daemon-interface.md §6.1) and size.
PARAMS_FILES: Final = {
    "porep-32g": "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-"
    "82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820.params",
    "porep-64g": "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-2-sha256_hasher-"
    "96f1b4a04c5c51e4759bbf224bbc2ef5a42c7100f16ec0637123f16a845ddfb2.params",
    "wpost-32g": "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-"
    "0377ded656c6f524f1618760bffe4e0a1c51d5a70c4509eedae8a27555733edc.params",
    "winning-32g": "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-"
    "559e581f022bb4e4ec6e719e563bf0e026ad6de42e56c18714a2c692b1b88d7e.params",
    "snap-32g": "v28-empty-sector-update-merkletree-poseidon_hasher-8-8-0-"
    "3b7f44a9362e3985369454947bc94022e118211e49fd672d52bec1cbfd599d18.params",
    "snap-64g": "v28-empty-sector-update-merkletree-poseidon_hasher-8-8-2-"
    "102e1444a7e9a97ebf1e3d6855dcc77e66c011ea66f936d9b2c508f87f2f83a7.params",
}
# Constraints per circuit (docs/daemon-interface.md §6.2; WinningPoSt as measured), for the log lines that print them.
CONSTRAINTS: Final = {
    ProofKind.POREP_SEAL_COMMIT: 130_278_869,
    ProofKind.SNAP_DEALS_UPDATE: 81_000_000,
    ProofKind.WINDOW_POST_PARTITION: 125_000_000,
    ProofKind.WINNING_POST: 370_000,
}
# 64 GiB circuits are not reachable by proofs in pipeline mode; PreloadSRS sizes them like the 32G ones doubled.
SRS_BYTES: Final = {
    **{facts.circuit_id: facts.srs_bytes for facts in KINDS.values()},
    "porep-64g": 2 * KINDS[ProofKind.POREP_SEAL_COMMIT].srs_bytes,
    "snap-64g": 2 * KINDS[ProofKind.SNAP_DEALS_UPDATE].srs_bytes,
}
PCE_FILES: Final = {
    ProofKind.POREP_SEAL_COMMIT: ("pce-porep-32g.bin", "PoRep 32G"),
    ProofKind.SNAP_DEALS_UPDATE: ("pce-snap-deals-32g.bin", "SnapDeals"),
    ProofKind.WINDOW_POST_PARTITION: ("pce-window-post.bin", "WindowPoSt"),
    ProofKind.WINNING_POST: ("pce-winning-post.bin", "WinningPoSt"),
}
PCE_WRITE_BYTES_PER_S: Final = 2 * GiB


class UnknownCircuit(KeyError):
    pass


@dataclass(eq=False, slots=True)
class Resident:
    """A loaded SRS or cached PCE: its reservation, its real memory and who uses it."""

    circuit_id: str
    size: int
    reservation: Reservation
    block: Block
    refcount: int = 0
    last_used: float = 0.0


class Residency:
    def __init__(
        self, budget: Budget, arena: Arena, clock: Clock, pool: CpuPool, log: Logger, param_cache: str, min_idle_s: int
    ) -> None:
        self.budget = budget
        self.arena = arena
        self.clock = clock
        self.pool = pool
        self.log = log
        self.param_cache = Path(param_cache)
        self.min_idle_s = min_idle_s
        self.srs: dict[str, Resident] = {}
        self.pce: dict[str, Resident] = {}
        self._loading: dict[str, asyncio.Future[None]] = {}
        self.extractions: set[asyncio.Task[None]] = set()
        self._extracting: set[str] = set()
        budget.evictor = self.evict

    # SRS ------------------------------------------------------------------------------------

    async def acquire_srs(self, circuit_id: str, *, preload: bool = False) -> tuple[bool, int]:
        """Loads the SRS if needed; takes a reference unless preloading. Returns (already loaded, load ms)."""
        if circuit_id not in PARAMS_FILES:
            raise UnknownCircuit(circuit_id)
        while circuit_id in self._loading:
            await self._loading[circuit_id]
        entry = self.srs.get(circuit_id)
        already = entry is not None
        started = time.monotonic()
        if entry is None:
            done = asyncio.get_running_loop().create_future()
            self._loading[circuit_id] = done
            try:
                entry = await self._load(circuit_id)
            finally:
                del self._loading[circuit_id]
                done.set_result(None)
        else:
            self.log.debug(tracing.SRS, msg.SRS_CACHE_HIT, ("circuit_id", circuit_id))
        entry.last_used = time.monotonic()
        if not preload:
            entry.refcount += 1
        return already, int((time.monotonic() - started) * 1000)

    def release_srs(self, circuit_id: str) -> None:
        entry = self.srs.get(circuit_id)
        if entry is not None:
            entry.refcount -= 1
            entry.last_used = time.monotonic()

    async def _load(self, circuit_id: str) -> Resident:
        size = SRS_BYTES[circuit_id]
        reservation = await self.budget.acquire(size)
        self.log.info(
            tracing.SRS,
            msg.SRS_LOADING,
            ("circuit_id", circuit_id),
            ("path", str(self.param_cache / PARAMS_FILES[circuit_id])),
            ("file_size_gib", gib(size)),
        )
        started = time.monotonic()
        block = await self.arena.alloc(size)
        await self.clock.sleep(timemodel.srs_load_s(size) - (time.monotonic() - started) / self.clock.scale)
        entry = Resident(circuit_id, size, reservation, block)
        self.srs[circuit_id] = entry
        self.log.info(
            tracing.SRS,
            msg.SRS_LOADED,
            ("circuit_id", circuit_id),
            ("elapsed_ms", int((time.monotonic() - started) * 1000)),
            ("budget_used_gib", gib(self.budget.used)),
            ("budget_available_gib", gib(self.budget.available)),
        )
        return entry

    # PCE ------------------------------------------------------------------------------------

    def start_extraction(self, facts: KindFacts) -> None:
        """After a proof of a kind with no cached PCE.

        The daemon can start a second, overlapping extraction in a short race window; the engine
        keeps one per circuit, since with a deep queue that race would otherwise fire for every
        queued job and starve the budget.
        """
        if facts.circuit_id in self.pce or facts.circuit_id in self._extracting:
            return
        self._extracting.add(facts.circuit_id)
        task = asyncio.get_running_loop().create_task(self._extract(facts))
        self.extractions.add(task)
        task.add_done_callback(self.extractions.discard)
        task.add_done_callback(lambda _: self._extracting.discard(facts.circuit_id))

    async def _poll_acquire(self, amount: int) -> Reservation:
        # The daemon polls try_acquire once a second rather than queueing behind partitions.
        while True:
            reservation = self.budget.try_acquire(amount)
            if reservation is not None:
                return reservation
            await self.clock.sleep(1.0)

    async def _extract(self, facts: KindFacts) -> None:
        file_name, label = PCE_FILES[facts.kind]
        self.log.info(tracing.ENGINE, msg.BACKGROUND_PCE_STARTING_PREFIX + label)
        transient = await self._poll_acquire(PCE_EXTRACTION_TRANSIENT)
        scratch = await self.arena.alloc(PCE_EXTRACTION_TRANSIENT)
        try:
            started = time.monotonic()
            await self.pool.run(timemodel.PCE_EXTRACT_S)
            scratch.free()  # the recording constraint system is dropped as the extraction returns
            extract_ms = int((time.monotonic() - started) * 1000)
            constraints = CONSTRAINTS[facts.kind]
            self.log.info(
                tracing.PCE_RECORDING,
                msg.PCE_RECORDED,
                ("num_inputs", 328),
                ("num_aux", constraints // 5 * 4),
                ("num_constraints", constraints),
                ("a_nnz", constraints * 3),
                ("b_nnz", constraints * 2),
                ("c_nnz", constraints),
                ("a_aux_density", 0.5),
                ("b_input_density", 0.25),
                ("b_aux_density", 0.5),
            )
            summary = f"PceSummary {{ constraints: {constraints}, bytes: {facts.pce_bytes} }}"
            self.log.info(
                tracing.PIPELINE,
                msg.PCE_EXTRACTION_COMPLETE,
                ("circuit_id", facts.circuit_id),
                ("extract_ms", extract_ms),
                ("summary", summary),
            )
            permanent = await self._poll_acquire(facts.pce_bytes)
            block = await self.arena.alloc(facts.pce_bytes)
            path = str(self.param_cache / file_name)
            write_s = facts.pce_bytes / PCE_WRITE_BYTES_PER_S
            await self.clock.sleep(write_s)
            self.log.info(
                tracing.PCE_DISK,
                msg.PCE_SAVED_RAW,
                ("path", path),
                ("file_size_gib", Quoted(f"{facts.pce_bytes / GiB:.1f}")),
                ("duration_ms", int(self.clock.real(write_s) * 1000)),
                ("write_speed_gbs", Quoted(f"{PCE_WRITE_BYTES_PER_S / 1e9:.2f}")),
            )
            self.log.info(tracing.PIPELINE, msg.PCE_SAVED, ("circuit_id", facts.circuit_id), ("path", path))
            self.pce[facts.circuit_id] = Resident(
                facts.circuit_id, facts.pce_bytes, permanent, block, last_used=time.monotonic()
            )
            self.log.info(
                tracing.PIPELINE,
                msg.PCE_CACHED,
                ("circuit_id", facts.circuit_id),
                ("size_gib", facts.pce_bytes / GiB),
                ("budget_used_gib", gib(self.budget.used)),
            )
        finally:
            scratch.free()
            transient.release()
        self.log.info(tracing.ENGINE, msg.BACKGROUND_PCE_COMPLETE_PREFIX + label)

    # Eviction ---------------------------------------------------------------------------------

    async def evict(self, needed: int) -> int:
        """Frees idle SRS/PCE (unreferenced and idle ≥ eviction_min_idle), oldest first."""
        now = time.monotonic()
        min_idle = self.clock.real(self.min_idle_s)
        candidates = [
            (entry.last_used, kind, entry)
            for kind, table in (("srs", self.srs), ("pce", self.pce))
            for entry in table.values()
            # PCE is never referenced by a synthesis (docs/daemon-interface.md §0.8), so only SRS refcounts can be > 0.
            if entry.refcount == 0 and now - entry.last_used >= min_idle
        ]
        freed = 0
        for _, kind, entry in sorted(candidates, key=lambda c: c[0]):
            if freed >= needed:
                break
            table = self.srs if kind == "srs" else self.pce
            del table[entry.circuit_id]
            entry.block.free()
            entry.reservation.release()
            freed += entry.size
            label = msg.SRS_EVICTED if kind == "srs" else msg.PCE_EVICTED
            self.log.info(
                tracing.SRS if kind == "srs" else tracing.PIPELINE,
                label,
                ("circuit_id", entry.circuit_id),
                ("freed_gib", gib(entry.size)),
                ("budget_available_gib", gib(self.budget.available)),
            )
            self.log.info(
                tracing.ENGINE,
                msg.EVICTED_FOR_MEMORY_PRESSURE,
                ("entry", f"{kind}:{entry.circuit_id}"),
                ("freed_gib", gib(entry.size)),
            )
        return freed
