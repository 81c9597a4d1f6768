"""Model checkpoints on a log the engine wrote imitating upstream: read again, and grown by more proofs,
report, export and replay give what a cold read gives (tests/test_model_cache.py for the rest)."""

from __future__ import annotations

import asyncio

from engine.jobs import Status
from tests.engine.engine_harness import Captured, Factory, porep, post
from tests.test_model_cache import _same_as_cold


async def test_an_engine_log_read_again_and_grown_equals_a_cold_read(make_engine: Factory, captured: Captured) -> None:
    e = await make_engine()
    first = await asyncio.wait_for(asyncio.gather(e.prove(porep("porep-a")), e.prove(post("post-b"))), 60)
    assert [r.status for r in first] == [Status.COMPLETED] * 2
    assert _same_as_cold(captured.path) == 0
    read = captured.path.stat().st_size
    assert _same_as_cold(captured.path) == read
    grown = await asyncio.wait_for(asyncio.gather(e.prove(porep("porep-c")), e.prove(porep("porep-d"))), 60)
    assert [r.status for r in grown] == [Status.COMPLETED] * 2
    assert captured.path.stat().st_size > read
    assert _same_as_cold(captured.path) == read
