"""The engine's memory model follows the daemon (docs/daemon-interface.md §6.2, §6.4): reservations ahead of the
synthesis workers hold no memory, a synthesis' memory grows with its progress up to the measured
16 GiB, and the PCE extraction's working set is gone before the PCE itself is kept."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Callable

import pytest

from cuzktui.daemon_config import Config
from cuzktui.daemon_facts import (
    KINDS,
    PCE_EXTRACTION_TRANSIENT,
    SYNTHESIZED_PARTITION_RSS,
    ProofKind,
)
from cuzktui.logfilter import EnvFilter
from cuzktui.units import GiB
from engine.jobs import ProofRequest
from engine.memory import Arena, Budget, InputsHeld
from engine.pipeline import Engine
from engine.srs import Residency
from engine.synthesis import GROWTH_STEPS
from engine.timemodel import Clock, CpuPool
from engine.tracing import Logger
from tests.conftest import small_c1

POREP = KINDS[ProofKind.POREP_SEAL_COMMIT]
SCALE = 1 / 65536  # 16 GiB nominal = 256 KiB real


def quiet_logger() -> Logger:
    devnull = os.open(os.devnull, os.O_WRONLY)
    return Logger(EnvFilter.parse("off", lossy=False), colour=False, out_fd=devnull, err_fd=devnull)


async def until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.001)


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    config = Config()
    config.total_budget = 400 * GiB
    config.max_parallel_synthesis = 2
    config.engine.time_scale = 0.05
    config.engine.memory_scale = SCALE
    running = Engine(config, quiet_logger())
    running.start()
    try:
        yield running
    finally:
        await running.aclose()


async def test_partitions_waiting_for_a_worker_hold_a_reservation_and_no_memory(engine: Engine) -> None:
    engine.submit(
        ProofRequest(
            "porep-1000-1", ProofKind.POREP_SEAL_COMMIT, vanilla_proof=small_c1(), miner_id=1000, sector_number=1
        )
    )
    base = POREP.srs_bytes + PCE_EXTRACTION_TRANSIENT  # SRS loaded, PCE extraction running
    first_step = 2 * SYNTHESIZED_PARTITION_RSS // GROWTH_STEPS
    await until(
        lambda: engine.synth_active == 2 and engine.channel_waiting == 2 and engine.arena.nominal_in_use >= base
    )
    await until(lambda: engine.arena.nominal_in_use >= base + first_step)
    # Two synthesizing, two in the channel (capacity = synth_worker_count = 2) and one in the
    # dispatcher's hand, blocked on the full channel: five reservations of 14 GiB ...
    assert engine.budget.used == base + 5 * POREP.full_reservation
    # ... but only the two syntheses have memory, and only the first step of it.
    assert engine.arena.nominal_in_use == base + first_step


async def test_a_synthesis_grows_to_the_measured_size_and_parks_with_it(engine: Engine) -> None:
    engine.submit(
        ProofRequest(
            "porep-1000-1", ProofKind.POREP_SEAL_COMMIT, vanilla_proof=small_c1(), miner_id=1000, sector_number=1
        )
    )
    base = POREP.srs_bytes + PCE_EXTRACTION_TRANSIENT
    await until(lambda: engine.synth_active == 2 and engine.arena.nominal_in_use > base)
    seen: list[int] = []
    while engine.buffers["provers"] == 0:  # until the first synthesis ends
        if engine.synth_active == 2 and (not seen or seen[-1] != engine.arena.nominal_in_use):
            seen.append(engine.arena.nominal_in_use)
        await asyncio.sleep(0.001)
    growth = [n - base for n in seen]
    assert growth == sorted(growth)
    assert len(set(growth)) >= GROWTH_STEPS // 2  # in steps, not all at once
    assert growth[-1] <= 2 * SYNTHESIZED_PARTITION_RSS
    # The synthesized partition holds the measured 16 GiB (a/b/c + aux) until its prove start
    # returns (a GPU prove takes 3 model s; this runs within a poll of the synthesis' end).
    assert engine.buffers["provers"] >= 1
    assert engine.arena.nominal_in_use >= base + SYNTHESIZED_PARTITION_RSS + growth[-1] // 2


async def test_pce_extraction_working_set_is_freed_before_the_pce_is_kept() -> None:
    log = quiet_logger()
    budget = Budget(400 * GiB, log)
    arena = Arena(SCALE)
    clock = Clock(0.001)
    residency = Residency(budget, arena, clock, CpuPool(96, clock), log, "/nonexistent", 300)
    residency.start_extraction(POREP)
    await asyncio.gather(*residency.extractions)
    assert POREP.circuit_id in residency.pce
    # Never the working set and the PCE at once; the budget held both (§6.4), the memory did not.
    assert arena.peak_nominal == max(PCE_EXTRACTION_TRANSIENT, POREP.pce_bytes)
    assert arena.nominal_in_use == POREP.pce_bytes
    assert budget.used == POREP.pce_bytes


async def test_the_freed_heap_goes_back_once_no_input_is_held() -> None:
    """gRPC's receive buffers and a parse's are given back when the last input held is released, once."""
    trimmed = threading.Event()
    calls: list[int] = []

    def trim() -> None:
        calls.append(1)
        trimmed.set()

    held = InputsHeld(trim)
    held.hold()
    held.hold()
    held.release()
    held.hold()
    held.release()
    assert calls == []  # an input is still held
    held.release()
    assert await asyncio.to_thread(trimmed.wait, 30)
    assert calls == [1]
