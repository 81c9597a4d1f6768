"""The emulated CUDA pinned pool (docs/daemon-interface.md §6.6, §6.5 step 1): the first wave of partition
syntheses is unpinned, later ones check out three real a/b/c buffers each, reused best-fit and
returned at GPU prove start; a blocked budget acquisition frees the idle ones, smallest first."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import pytest

from cuzktui.daemon_config import Config
from cuzktui.daemon_facts import KINDS, ProofKind
from cuzktui.units import GiB
from engine.jobs import ProofRequest, Status
from engine.memory import Arena
from engine.pinned import SCALAR_SIZE, PinnedPool
from engine.pipeline import Engine
from engine.srs import CONSTRAINTS
from engine.timemodel import Clock
from tests.conftest import small_c1
from tests.engine.engine_harness import Captured

POREP = KINDS[ProofKind.POREP_SEAL_COMMIT]
BUF = CONSTRAINTS[ProofKind.POREP_SEAL_COMMIT] * SCALAR_SIZE
SCALE = 1 / 65536


def test_a_porep_buffer_is_num_constraints_times_32_bytes() -> None:
    assert BUF == 4_168_923_808


async def test_pool_reuses_best_fit_and_frees_idle_buffers_smallest_first(captured: Captured) -> None:
    out = captured
    arena = Arena(SCALE)
    pool = PinnedPool(arena, Clock(0.001), out.log)
    small, big, huge = await pool.checkout(1 * GiB), await pool.checkout(4 * GiB), await pool.checkout(6 * GiB)
    assert None not in (small, big, huge) and small and big and huge
    assert pool.total_allocated == 3 and pool.total_bytes == 11 * GiB == arena.nominal_in_use
    for buf in (small, big, huge):
        pool.checkin(buf)
    again = await pool.checkout(3 * GiB)  # the 4 GiB one fits best, no allocation
    assert again is big and pool.total_allocated == 3
    assert out.messages("pinned pool: checkout (reuse)")[-1].endswith("size_gib=4.0 free_remaining=2")
    # Idle buffers go smallest first until the target is met; the checked-out one stays.
    assert pool.shrink(2 * GiB) == 7 * GiB
    assert pool.free == [] and pool.total_bytes == 4 * GiB == arena.nominal_in_use
    freed = out.messages("pinned pool: freed buffer (evictor)")
    assert [line.split("freed buffer (evictor) ")[1] for line in freed] == [
        "freed_gib=1.0 total_freed_gib=1.0",
        "freed_gib=6.0 total_freed_gib=7.0",
    ]
    assert pool.shrink(GiB) == 0  # nothing idle left


@pytest.fixture
async def engine(captured: Captured) -> AsyncIterator[tuple[Engine, Captured]]:
    config = Config()
    config.total_budget = 400 * GiB
    config.max_parallel_synthesis = 2
    config.eviction_min_idle_s = 10**6  # no SRS/PCE eviction: only the pool can give way
    config.engine.time_scale = 0.004
    config.engine.memory_scale = SCALE
    running = Engine(config, captured.log)
    running.start()
    try:
        yield running, captured
    finally:
        await running.aclose()


async def prove(engine: Engine, n: int) -> None:
    job, _ = engine.submit(
        ProofRequest(
            f"porep-1000-{n}", ProofKind.POREP_SEAL_COMMIT, vanilla_proof=small_c1(), miner_id=1000, sector_number=1
        )
    )
    result = await asyncio.wait_for(job.future, 60)
    assert result.status is Status.COMPLETED


def pinned_flags(out: Captured) -> list[bool]:
    return [line.endswith("is_pinned=true") for line in out.messages("partition synthesis complete partition=")]


async def test_first_wave_is_unpinned_then_buffers_are_reused_and_returned_at_prove_start(
    engine: tuple[Engine, Captured],
) -> None:
    e, out = engine
    await prove(e, 1)
    # The two syntheses that started before any had completed had no capacity hint: unpinned.
    assert len(out.messages("no capacity hint cached — first synthesis will grow organically")) == 2
    assert len(out.messages("using cached capacity hint for synthesis")) == 8
    flags = pinned_flags(out)
    assert flags.count(False) == 2 and flags.count(True) == 8
    attempts = out.messages("attempting pinned memory synthesis")
    assert len(attempts) == 8 == len(out.messages("pinned prover created for partition synthesis"))
    assert attempts[0].endswith(f"circuit_id=porep-32g num_constraints=130278869 scalar_size=32 buf_gib={BUF / GiB!r}")
    allocated = e.pinned.total_allocated
    assert allocated % 3 == 0 and 6 <= allocated < 24  # a few sets at once, not one per partition
    assert len(out.messages("pinned pool: allocated new buffer")) == allocated
    # Every buffer is back in the pool, still resident, and none of it is in the budget.
    assert e.pinned.checked_out == 0 and len(e.pinned.free) == allocated
    assert e.pinned.total_bytes == allocated * BUF
    assert e.budget.used == POREP.srs_bytes + POREP.pce_bytes
    assert e.arena.nominal_in_use == POREP.srs_bytes + POREP.pce_bytes + allocated * BUF

    # A second proof: every synthesis is pinned, and the pool serves it without allocating.
    await prove(e, 2)
    assert pinned_flags(out)[10:] == [True] * 10
    assert e.pinned.total_allocated == allocated
    assert len(out.messages("pinned pool: checkout (reuse)")) == 3 * 18 - allocated

    # Check-in happens when the prove-start call returns: three lines right before its GPU_TIMING line.
    lines = [line for line in out.lines() if "TIMELINE" not in line]
    checkins = [i for i, line in enumerate(lines) if "pinned pool: checkin" in line]
    assert len(checkins) == 3 * 18
    for first in checkins[::3]:
        assert all("pinned pool: checkin size_gib=" in lines[first + k] for k in range(3))
        assert "GPU_TIMING spawn_blocking prove_start" in lines[first + 3]


async def test_a_blocked_budget_acquisition_frees_the_idle_pinned_buffers(engine: tuple[Engine, Captured]) -> None:
    e, out = engine
    await prove(e, 1)
    buffers = e.pinned.total_allocated
    resident = e.arena.nominal_in_use
    used = e.budget.used
    # More than is free: the evictor frees idle pinned buffers first (SRS/PCE are not idle long
    # enough), which gives no budget back, so the acquisition keeps waiting with the pool drained.
    waiting = asyncio.ensure_future(e.budget.acquire(e.budget.available + 1))
    try:
        for _ in range(100):
            if e.pinned.total_bytes == 0:
                break
            await asyncio.sleep(0.01)
        assert e.pinned.total_bytes == 0 and e.pinned.free == []
        assert not waiting.done()
        assert e.budget.used == used
        assert e.arena.nominal_in_use == resident - buffers * BUF
        freed = out.messages("pinned pool: freed buffer (evictor)")
        assert len(freed) == buffers
        assert all(re.search(rf"freed_gib={BUF / GiB!r} total_freed_gib=", line) for line in freed)
        assert "SRS evicted" not in out.path.read_text()
    finally:
        waiting.cancel()
    # The next pinned syntheses allocate afresh.
    await prove(e, 2)
    assert e.pinned.total_allocated > buffers
