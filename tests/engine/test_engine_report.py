"""The report (and the one reader behind replay and export) on logs the engine wrote imitating upstream:
a batch, monolithic mode (also as a bare log), a job dropped by the monolithic GPU queue, a proof
rejected by the self-check after its assembly."""

from __future__ import annotations

import asyncio
from typing import Any

from cuzktui.daemon_facts import ProofKind
from cuzktui.proto import proving_pb2 as pb
from cuzktui.report import build_report
from cuzktui.session import load_session
from engine.jobs import ProofRequest, Status
from tests.conftest import small_c1
from tests.engine.engine_harness import Captured, Factory, overtake_in_the_gpu_queue, porep, porep_request, post


def report(captured: Captured) -> dict[str, Any]:
    _, model = load_session(captured.path)
    return build_report(model, str(captured.path))


async def test_every_sector_of_an_engine_batch_is_counted(make_engine: Factory, captured: Captured) -> None:
    e = await make_engine(max_batch_size=2, max_batch_wait_ms=60_000)
    results = await asyncio.wait_for(asyncio.gather(e.prove(porep("porep-a")), e.prove(porep("porep-b"))), 60)
    assert [r.status for r in results] == [Status.COMPLETED, Status.COMPLETED]
    data = report(captured)
    assert data["counts"] == {"completed": 2, "failed": 0, "incomplete": 0, "lost": 0}
    assert {j["job_id"]: j["status"] for j in data["jobs"]} == {"porep-a": "completed", "porep-b": "completed"}


async def test_monolithic_mode_successes_on_the_engine_are_counted(make_engine: Factory, captured: Captured) -> None:
    e = await make_engine(pipeline_enabled=False)
    results = await asyncio.wait_for(asyncio.gather(e.prove(porep("mono-1")), e.prove(post("mono-2"))), 60)
    assert [r.status for r in results] == [Status.COMPLETED, Status.COMPLETED]
    assert report(captured)["counts"] == {"completed": 2, "failed": 0, "incomplete": 0, "lost": 0}


async def test_a_job_the_engines_gpu_queue_dropped_is_lost_with_the_reason(
    make_engine: Factory, captured: Captured
) -> None:
    e = await make_engine(time_scale=0.01)
    first, dropped, last = await overtake_in_the_gpu_queue(e, captured)
    await asyncio.wait_for(asyncio.gather(first, last), 60)
    assert not dropped.done()
    jobs = {j["job_id"]: j for j in report(captured)["jobs"]}
    assert jobs["winning-c"]["status"] == "completed"
    assert jobs["winning-b"]["status"] == "lost" and "GPU queue" in jobs["winning-b"]["reason"]
    dropped.cancel()


def test_the_engines_bare_log_in_monolithic_mode_replays_and_reports(engine_factory: Any) -> None:
    engine = engine_factory({"pipeline": {"enabled": False}})
    stub = engine.stub()
    assert stub.Prove(pb.ProveRequest(submit=porep_request("mono-1")), timeout=30).result.status == 1
    failed = stub.Prove(pb.ProveRequest(submit=porep_request("mono-bad", payload=b"")), timeout=30).result
    assert failed.status == pb.AwaitProofResponse.FAILED
    _, model = load_session(engine.stdout_path)
    d = model.daemon
    assert d.phase == "ready" and d.listen and d.budget_total_gib is not None
    data = build_report(model, str(engine.stdout_path))
    assert data["engine_time"]  # its figures are the emulated box's, and the report says so
    assert {j["job_id"]: j["status"] for j in data["jobs"]} == {"mono-1": "completed", "mono-bad": "failed"}


async def test_a_proof_the_engines_self_check_rejects_is_failed_after_assembly(
    make_engine: Factory, captured: Captured
) -> None:
    e = await make_engine()
    good = ProofRequest(
        "porep-1000-1", ProofKind.POREP_SEAL_COMMIT, vanilla_proof=small_c1(), sector_number=1, miner_id=1000
    )
    other = ProofRequest(
        "porep-2000-1", ProofKind.POREP_SEAL_COMMIT, vanilla_proof=small_c1(), sector_number=1, miner_id=2000
    )
    results = [await asyncio.wait_for(e.prove(request), 60) for request in (good, other)]
    assert [r.status for r in results] == [Status.COMPLETED, Status.FAILED]
    jobs = {j["job_id"]: j for j in report(captured)["jobs"]}
    assert jobs["porep-1000-1"]["status"] == "completed"
    assert jobs["porep-2000-1"]["status"] == "failed" and "self-check" in jobs["porep-2000-1"]["reason"]
