"""The engine's job tracking and scheduling as upstream's (cuzk-core engine.rs, scheduler.rs,
status.rs, memory.rs; cuzk-server service.rs), quirks included, on in-process engines."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from cuzktui import daemon_messages as msg
from cuzktui.daemon_facts import ProofKind
from cuzktui.proofinputs import SnapCommitments, generate_snap_vanilla
from cuzktui.proto import proving_pb2 as pb
from cuzktui.units import GiB
from engine.jobs import JobResult, ProofRequest, Status
from engine.memory import Budget
from engine.server import ProvingService
from engine.views import status_document
from tests.conftest import small_c1
from tests.engine.engine_harness import Captured, Factory, overtake_in_the_gpu_queue, porep, post, until


def snap_request(request_id: str) -> ProofRequest:
    comms = SnapCommitments.generate()
    return ProofRequest(
        request_id,
        ProofKind.SNAP_DEALS_UPDATE,
        vanilla_proofs=[generate_snap_vanilla(n, challenges=1) for n in range(16)],
        registered_proof=3,
        comm_r_old=comms.comm_r_old,
        comm_r_new=comms.comm_r_new,
        comm_d_new=comms.comm_d_new,
    )


class Context:
    """The part of a grpc.aio servicer context the service uses; abort raises like grpc's does."""

    def __init__(self, remaining: float | None = None) -> None:
        self.remaining = remaining
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def time_remaining(self) -> float | None:
        return self.remaining

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted = (code, details)
        raise grpc.aio.AbortError()


# Issue 16 point 4: a waiter's deadline or cancel never ends the job ------------------------------


async def test_an_abandoned_waiter_leaves_the_job_to_the_other_waiters(make_engine: Factory) -> None:
    e = await make_engine()
    first = e.prove(porep("porep-1000-7"))
    first.cancel()  # a Prove whose caller hit its deadline: only its own receiver goes away
    later = e.await_result("porep-1000-7")
    assert isinstance(later, asyncio.Future)
    result = await asyncio.wait_for(later, 60)
    assert result.status is Status.COMPLETED and len(result.proof) == 10 * 192
    assert e.await_result("porep-1000-7") is result  # kept for a later AwaitProof


async def test_a_server_side_deadline_answers_cancelled_timeout_expired_and_the_job_goes_on(
    make_engine: Factory,
) -> None:
    e = await make_engine(time_scale=0.01)
    service = ProvingService(e)
    context = Context(remaining=0.05)  # a 29 s modelled synthesis takes 0.29 s here
    submit = pb.SubmitProofRequest(
        request_id="r1", proof_kind=pb.POREP_SEAL_COMMIT, vanilla_proof=small_c1(), miner_id=1000, sector_number=1
    )
    with pytest.raises(grpc.aio.AbortError):
        await service.Prove(pb.ProveRequest(submit=submit).SerializeToString(), context)
    assert context.aborted == (grpc.StatusCode.CANCELLED, msg.TIMEOUT_EXPIRED)
    answer = await asyncio.wait_for(service.AwaitProof(pb.AwaitProofRequest(job_id="r1"), Context()), 60)
    assert answer.status == pb.AwaitProofResponse.COMPLETED and answer.job_id == "r1"


# Issue 16 point 5: the same request_id twice in flight --------------------------------------------


async def test_the_same_id_twice_proves_twice_and_the_first_result_answers_both(
    make_engine: Factory, captured: Captured
) -> None:
    e = await make_engine()
    one, two = e.prove(post("winpost-1000-1")), e.prove(post("winpost-1000-1"))
    first, second = await asyncio.wait_for(asyncio.gather(one, two), 60)
    assert first is second and first.status is Status.COMPLETED
    # Both jobs were enqueued and proved; the second completion found no waiter left.
    await until(lambda: e.counters.completed == 2, "the second job to be proved")
    assert len(captured.messages(f"{msg.JOB_ENQUEUED} job_id=winpost-1000-1")) == 2
    assert len(captured.messages(msg.PROOF_COMPLETED_PIPELINE)) == 2


async def test_the_same_partitioned_id_twice_shares_one_assembler_and_discards_the_rest(
    make_engine: Factory, captured: Captured
) -> None:
    e = await make_engine()
    one, two = e.prove(porep("porep-1000-9")), e.prove(porep("porep-1000-9"))
    first, second = await asyncio.wait_for(asyncio.gather(one, two), 60)
    assert first is second and first.status is Status.COMPLETED
    # The second registration replaced the first's assembler: it was filled by whichever
    # partitions came first, and the other ten results had nowhere to go.
    await until(lambda: len(captured.messages(msg.ASSEMBLER_NOT_FOUND)) == 10, "the ten orphaned partitions")
    assert len(captured.messages(msg.PROOF_ASSEMBLED)) == 1 and e.counters.completed == 1
    orphans = captured.messages(msg.ASSEMBLER_NOT_FOUND)
    expected = f"WARN cuzk_core::engine: {msg.ASSEMBLER_NOT_FOUND} job_id=porep-1000-9 partition="
    assert all(expected in line for line in orphans)


# Issue 16 point 6: GetStatus as Curio's backpressure reads it ---------------------------------------


async def test_queue_position_is_the_queue_length_whatever_the_priority(make_engine: Factory) -> None:
    e = await make_engine(time_scale=1.0, synthesis_concurrency=1)
    e.submit(post("wdpost-0", ProofKind.WINDOW_POST_PARTITION))  # its 28 s synthesis holds the batch task
    await until(lambda: len(e.scheduler) == 0, "the first job to be dequeued")
    positions = [
        e.submit(post("winning-a"))[1],  # Critical
        e.submit(porep("porep-b"))[1],  # Normal
        e.submit(post("winning-c"))[1],  # Critical again: still behind both (scheduler.rs: queue.len())
    ]
    assert positions == [0, 1, 2]


async def test_in_progress_counts_busy_gpu_workers_only(make_engine: Factory) -> None:
    e = await make_engine(time_scale=1.0, synthesis_concurrency=1)
    service = ProvingService(e)
    e.submit(post("wdpost-0", ProofKind.WINDOW_POST_PARTITION))
    await until(lambda: len(e.scheduler) == 0, "the first job to be dequeued")
    e.submit(post("wdpost-1", ProofKind.WINDOW_POST_PARTITION))
    status = await service.GetStatus(pb.GetStatusRequest(), Context())
    # One WindowPoSt synthesising, one queued: no GPU worker is busy, so nothing is in progress.
    assert [(q.proof_kind, q.pending, q.in_progress) for q in status.queues] == [("window-post", 1, 0)]


async def test_loaded_srs_lists_only_what_preload_itself_loaded(make_engine: Factory) -> None:
    e = await make_engine()
    service = ProvingService(e)
    assert (await asyncio.wait_for(e.prove(post("winning-1")), 60)).status is Status.COMPLETED
    again = await service.PreloadSRS(pb.PreloadSrsRequest(circuit_id="winning-32g"), Context())
    assert again.already_loaded and again.load_time_ms == 0
    fresh = await service.PreloadSRS(pb.PreloadSrsRequest(circuit_id="porep-32g"), Context())
    assert not fresh.already_loaded
    status = await service.GetStatus(pb.GetStatusRequest(), Context())
    assert [s.circuit_id for s in status.loaded_srs] == ["porep-32g"]


# Issue 16 point 7: the monolithic GPU queue key (0, 0) ----------------------------------------------


async def test_a_monolithic_job_queued_behind_another_replaces_it_and_is_never_answered(
    make_engine: Factory, captured: Captured
) -> None:
    e = await make_engine(time_scale=0.01)
    first, dropped, last = await overtake_in_the_gpu_queue(e, captured)
    assert (await asyncio.wait_for(first, 60)).status is Status.COMPLETED
    assert (await asyncio.wait_for(last, 60)).status is Status.COMPLETED
    assert not dropped.done()
    assert not [line for line in captured.lines() if "GPU_PICKUP,winning-b" in line]
    # Its memory went with it: only SRS/PCE stay charged once extraction is over.
    await until(lambda: not e.residency.extractions, "PCE extraction to end")
    assert e.budget.used == sum(entry.size for entry in (*e.residency.srs.values(), *e.residency.pce.values()))


# Issue 7: the /status tracker, TIMELINE and lines of batches, the evictor ---------------------------


async def test_monolithic_work_is_invisible_to_status_but_counted_by_get_status(make_engine: Factory) -> None:
    e = await make_engine(time_scale=0.01)
    service = ProvingService(e)
    async with e.gpu_locks[0]:
        waiter = e.prove(post("winning-a"))
        await until(lambda: e.workers[0].job is not None, "the job on the GPU")
        document = status_document(e)
        assert [w["state"] for w in document["gpu_workers"]] == ["idle"]
        assert document["pipelines"] == [] and document["synthesis"]["active"] == 0
        status = await service.GetStatus(pb.GetStatusRequest(), Context())
        assert [g.current_job_id for g in status.gpus] == ["winning-a"]
    assert (await asyncio.wait_for(waiter, 60)).status is Status.COMPLETED
    assert status_document(e)["counters"]["total_completed"] == 0 and e.counters.completed == 1


async def test_a_batch_logs_upstreams_lines_and_timeline_for_its_first_request_only(
    make_engine: Factory, captured: Captured
) -> None:
    e = await make_engine(max_batch_size=2, max_batch_wait_ms=60_000)
    waiters = [e.prove(porep("porep-a")), e.prove(porep("porep-b"))]
    results: list[JobResult] = await asyncio.wait_for(asyncio.gather(*waiters), 60)
    assert [r.status for r in results] == [Status.COMPLETED, Status.COMPLETED]
    timeline = [line.split(",")[2:4] for line in captured.lines() if line.startswith("TIMELINE,")]
    assert {job for _, job in timeline} == {"porep-a"}
    events = ["SYNTH_START", "SYNTH_END", "GPU_QUEUE", "GPU_PICKUP", "GPU_START", "GPU_END"]
    assert [event for event, _ in timeline] == events
    (split,) = captured.messages(msg.BATCH_SPLITTING)
    assert f"INFO cuzk_core::engine: {msg.BATCH_SPLITTING} total_proof_bytes=3840 num_sectors=2 synth_ms=" in split
    delivered = captured.messages(msg.BATCH_SECTOR_DELIVERED)
    assert [line.split(f"{msg.BATCH_SECTOR_DELIVERED} ")[1].split(" total_ms=")[0] for line in delivered] == [
        "sector_idx=0 job_id=porep-a proof_len=1920",
        "sector_idx=1 job_id=porep-b proof_len=1920",
    ]
    assert not captured.messages(msg.PROOF_COMPLETED_PIPELINE)


async def test_partitioned_dispatch_lines_come_in_upstreams_order(make_engine: Factory, captured: Captured) -> None:
    e = await make_engine()
    assert (await asyncio.wait_for(e.prove(porep("porep-1")), 60)).status is Status.COMPLETED
    text = captured.path.read_text()
    assert text.index(msg.DISPATCHING_PARTITIONS) < text.index(msg.ASSIGNED_SEQUENCE)
    assert text.index(msg.PROOF_ASSEMBLED) > text.rindex(msg.PARTITION_GPU_COMPLETE)
    # groth16_ntt_h.cu: one CUZK_NTT_H line per circuit, before the thread's ntt_msm_h timing.
    lines = captured.lines()
    ntt = [i for i, line in enumerate(lines) if line.startswith(msg.CUZK_NTT_H_PREFIX)]
    assert len(ntt) == 10
    assert all(lines[i + 1].startswith("CUZK_TIMING: gpu_tid=0 ntt_msm_h_ms=") for i in ntt)
    assert lines[ntt[0]].startswith("CUZK_NTT_H: d_b_alloc=") and lines[ntt[0]].endswith("ms")


async def test_the_evictor_is_asked_for_the_whole_amount_and_every_oversized_acquire_warns(
    captured: Captured,
) -> None:
    budget = Budget(10 * GiB, captured.log)
    asked: list[int] = []

    async def evictor(needed: int) -> int:
        asked.append(needed)
        if needed > budget.total:
            return 0  # nothing can ever make room for it
        budget.used -= 2 * GiB  # just enough for the 4 GiB request
        return 2 * GiB

    budget.evictor = evictor
    budget.used = 8 * GiB
    await budget.acquire(4 * GiB)
    assert asked == [4 * GiB]  # memory.rs: evict_fn(amount), not the shortfall
    for _ in range(2):
        waiting = asyncio.ensure_future(budget.acquire(20 * GiB))
        await until(lambda: len(asked) > 1, "the oversized acquire to ask the evictor")
        waiting.cancel()
        asked[1:] = []
    warned = captured.messages(msg.ACQUIRE_EXCEEDS_BUDGET)
    assert len(warned) == 2
    assert warned[0].endswith(f"WARN cuzk_core::memory: {msg.ACQUIRE_EXCEEDS_BUDGET} amount_gib=20 total_gib=10")


async def test_a_partition_failure_leaks_in_the_status_tracker_as_upstreams_does(
    make_engine: Factory, captured: Captured
) -> None:
    e = await make_engine()
    service = ProvingService(e)
    job, _ = e.submit(porep("porep-short"))
    job.vanilla_partitions = 9  # a C1 with nine partition proofs for a ten-partition circuit
    waiter = e.await_result("porep-short")
    assert isinstance(waiter, asyncio.Future)
    result = await asyncio.wait_for(waiter, 60)
    assert result.status is Status.FAILED
    assert result.error == "partition 9 synthesis failed: partition 9 >= vanilla_proofs.len() 9"
    (line,) = captured.messages(msg.PARTITION_SYNTH_FAILED)
    assert line.endswith(
        f"ERROR cuzk_core::engine: {msg.PARTITION_SYNTH_FAILED} error=partition 9 >= vanilla_proofs.len() 9 "
        "job_id=porep-short partition=9"
    )
    # The other nine partitions still come out of synthesis and are dropped one way or another.
    dropped = (msg.SKIPPING_GPU_FAILED, msg.DISCARDING_FAILED_RESULT, msg.PARTITION_GPU_COMPLETE)
    await until(lambda: sum(len(captured.messages(m)) for m in dropped) == 9, "the nine other partitions")
    e.prune_pipelines()
    document = status_document(e)
    # status.rs: synth_active is never lowered for the failure, the job never leaves `pipelines`,
    # and its failure is not counted there; GetStatus (engine.rs JobTracker) counts it.
    assert document["synthesis"]["active"] == 1
    (pipeline,) = document["pipelines"]
    assert pipeline["job_id"] == "porep-short" and pipeline["partitions"][9]["state"] == "failed"
    assert document["counters"]["total_failed"] == 0
    status = await service.GetStatus(pb.GetStatusRequest(), Context())
    assert status.total_proofs_failed == 1
    assert [entry.refcount for entry in e.residency.srs.values()] == [0]


async def test_a_snapdeals_batch_fails_every_request_at_the_split(make_engine: Factory, captured: Captured) -> None:
    e = await make_engine(max_batch_size=2, max_batch_wait_ms=60_000)
    snap = [snap_request(f"snap-{n}") for n in "ab"]
    results = await asyncio.wait_for(asyncio.gather(*(e.prove(r) for r in snap)), 60)
    error = "proof bytes length mismatch: got 3072, expected 0 (0 partitions × 192 bytes)"
    assert [(r.status, r.error) for r in results] == [(Status.FAILED, f"proof split failed: {error}")] * 2
    assert [entry.refcount for entry in e.residency.srs.values()] == [0]  # failed, but the SRS is free to go
    (line,) = captured.messages(msg.SPLIT_BATCH_FAILED)
    assert line.endswith(f"ERROR cuzk_core::engine: {msg.SPLIT_BATCH_FAILED} error={error}")
    # Only the first request was synthesised, under its own span.
    (done,) = captured.messages(msg.SNAP_COMPLETE)
    assert 'INFO synthesize_snap_deals{job_id="snap-a"}: cuzk_core::pipeline: SnapDeals synthesis complete' in done
    assert "SnapDeals synthesis complete synth_ms=" in done and "num_circuits=16 num_constraints=" in done


async def test_a_post_synthesis_logs_upstreams_lines_under_its_own_span(
    make_engine: Factory, captured: Captured
) -> None:
    e = await make_engine()
    assert (await asyncio.wait_for(e.prove(post("winning-1")), 60)).status is Status.COMPLETED
    span = 'INFO synthesize_winning_post{job_id="winning-1"}: cuzk_core::pipeline: '
    (building,) = captured.messages(msg.WINNING_BUILDING)
    assert building.endswith(f"{span}{msg.WINNING_BUILDING} num_sectors=1")
    (synthesizing,) = captured.messages(msg.WINNING_SYNTHESIZING)
    assert synthesizing.endswith(f"{span}{msg.WINNING_SYNTHESIZING} num_circuits=1")
    (done,) = captured.messages(msg.WINNING_COMPLETE)
    assert f"{span}{msg.WINNING_COMPLETE} synth_ms=" in done and " num_constraints=" in done


async def test_the_batch_collector_flushes_on_a_new_kind_and_is_preempted_by_post(
    make_engine: Factory, captured: Captured
) -> None:
    e = await make_engine(max_batch_size=3, max_batch_wait_ms=10**8)  # the wait never runs out here

    def dequeued(job_id: str) -> bool:
        return bool(captured.messages(f"{msg.JOB_DEQUEUED} job_id={job_id} "))

    def processing(span: str) -> list[str]:
        return [line for line in captured.messages(msg.PROCESSING_BATCH) if f"INFO {span}: cuzk_core::engine: " in line]

    first = e.prove(porep("porep-a"))
    await until(lambda: dequeued("porep-a"), "porep-a in the pending batch")
    winning = e.prove(post("winning-w"))  # not batchable: the pending batch goes first
    results = await asyncio.wait_for(asyncio.gather(first, winning), 60)
    assert [r.status for r in results] == [Status.COMPLETED, Status.COMPLETED]
    assert processing("synth_preempt_flush{batch_size=1 proof_kind=porep-c2}")
    assert processing("synth_single{proof_kind=winning-post}")
    text = captured.path.read_text()
    assert text.index("synth_preempt_flush{") < text.index("synth_single{")

    second = e.prove(porep("porep-b"))
    await until(lambda: dequeued("porep-b"), "porep-b in the pending batch")
    e.prove(ProofRequest("snap-s", ProofKind.SNAP_DEALS_UPDATE, vanilla_proofs=[b"p"] * 16, registered_proof=3))
    # batch_collector.rs add(): another batchable kind hands back the pending batch, as "full".
    assert (await asyncio.wait_for(second, 60)).status is Status.COMPLETED
    assert processing("synth_batch_full{batch_size=1 proof_kind=porep-c2}")
    assert not processing("synth_batch_full{batch_size=1 proof_kind=snap-update}")  # still waiting


async def test_a_preload_cut_by_its_deadline_still_loads_but_is_not_listed(make_engine: Factory) -> None:
    e = await make_engine(time_scale=0.01)
    service = ProvingService(e)
    cut = Context(remaining=0.001)
    with pytest.raises(grpc.aio.AbortError):
        await service.PreloadSRS(pb.PreloadSrsRequest(circuit_id="porep-32g"), cut)
    assert cut.aborted == (grpc.StatusCode.CANCELLED, msg.TIMEOUT_EXPIRED)
    await until(lambda: "porep-32g" in e.residency.srs, "the load to finish anyway")
    again = await service.PreloadSRS(pb.PreloadSrsRequest(circuit_id="porep-32g"), Context())
    assert again.already_loaded
    assert list((await service.GetStatus(pb.GetStatusRequest(), Context())).loaded_srs) == []
