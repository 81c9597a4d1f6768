"""All eight RPCs against a running cuzk-engine, over TCP and over a unix socket (docs/daemon-interface.md §1)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from cuzktui.proto import proving_pb2 as pb
from tests.conftest import small_c1
from tests.engine.engine_harness import porep_request, winning_request


def _code(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


@pytest.mark.parametrize("unix", [False, True], ids=["tcp", "unix"])
def test_all_eight_rpcs(engine_factory: Any, unix: bool) -> None:
    engine = engine_factory({"gpus": {"gpu_workers_per_device": 2}, "engine": {"gpus": 2}}, unix=unix)
    stub = engine.stub()

    submitted = stub.SubmitProof(porep_request("porep-1000-1"), timeout=10)
    assert submitted.job_id == "porep-1000-1"
    assert submitted.assigned_gpu == ""
    anonymous = stub.SubmitProof(porep_request(""), timeout=10)
    assert len(anonymous.job_id) == 36 and anonymous.job_id.count("-") == 4

    done = stub.AwaitProof(pb.AwaitProofRequest(job_id="porep-1000-1", timeout_ms=1), timeout=30)
    assert done.status == pb.AwaitProofResponse.COMPLETED
    assert len(done.proof) == 10 * 192
    assert done.total_ms >= done.queue_wait_ms and done.synthesis_ms > 0 and done.gpu_compute_ms > 0
    assert done.srs_load_ms == 0
    again = stub.AwaitProof(pb.AwaitProofRequest(job_id="porep-1000-1"), timeout=10)
    assert again.proof == done.proof  # finished results are kept
    assert stub.AwaitProof(pb.AwaitProofRequest(job_id=anonymous.job_id), timeout=30).status == 1

    proved = stub.Prove(pb.ProveRequest(submit=porep_request("")), timeout=30).result
    assert proved.status == pb.AwaitProofResponse.COMPLETED and proved.job_id == ""
    winning = winning_request("winpost-1000-00")
    win = stub.Prove(pb.ProveRequest(submit=winning), timeout=30).result
    assert win.status == 1 and len(win.proof) == 192 and win.job_id == "winpost-1000-00"
    # Same request, same (invalid) proof bytes: deterministic from the request.
    assert stub.Prove(pb.ProveRequest(submit=winning), timeout=30).result.proof == win.proof

    # Randomness that is no BLS12-381 scalar fails the job (as_safe_commitment), not the call.
    unreduced = pb.SubmitProofRequest()
    unreduced.CopyFrom(winning)
    unreduced.randomness = b"\xff" * 32
    refused = stub.Prove(pb.ProveRequest(submit=unreduced), timeout=30).result
    assert (refused.status, refused.error_message) == (
        pb.AwaitProofResponse.FAILED,
        "synthesis failed: Invalid commitment (randomness)",
    )

    failed = stub.Prove(pb.ProveRequest(submit=porep_request("empty", payload=b"")), timeout=30).result
    assert failed.status == pb.AwaitProofResponse.FAILED
    assert failed.error_message.startswith("C1 parse failed: ")
    assert failed.total_ms == 0 and failed.proof == b""

    assert _code(
        lambda: stub.SubmitProof(pb.SubmitProofRequest(request_id="x", proof_kind=pb.PROOF_KIND_UNSPECIFIED), timeout=5)
    ) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid proof_kind: 0",
    )
    assert _code(lambda: stub.Prove(pb.ProveRequest(), timeout=5)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "missing submit field",
    )
    assert _code(lambda: stub.AwaitProof(pb.AwaitProofRequest(job_id="nope"), timeout=5)) == (
        grpc.StatusCode.NOT_FOUND,
        "job not found: nope",
    )

    assert stub.CancelProof(pb.CancelProofRequest(job_id="porep-1000-1"), timeout=5).was_running is False
    evicted = stub.EvictSRS(pb.EvictSrsRequest(circuit_id="porep-32g"), timeout=5)
    assert (evicted.was_loaded, evicted.freed_bytes) == (False, 0)

    preload = stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="snap-32g"), timeout=30)
    assert preload.already_loaded is False
    assert stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="snap-32g"), timeout=30).already_loaded is True
    assert _code(lambda: stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="porep-2k"), timeout=5)) == (
        grpc.StatusCode.INTERNAL,
        "unknown circuit ID: porep-2k",
    )

    status = stub.GetStatus(pb.GetStatusRequest(), timeout=5)
    assert [g.ordinal for g in status.gpus] == [0, 0, 1, 1]  # one entry per GPU worker
    assert status.gpus[0].name == "cuzk-engine emulated GPU 0"
    assert status.gpus[0].vram_total_bytes == 80 << 30
    assert [s.circuit_id for s in status.loaded_srs] == ["snap-32g"]  # only PreloadSRS'd circuits
    assert list(status.queues) == []
    assert status.total_proofs_completed == 5 and status.total_proofs_failed == 2
    assert status.pinned_memory_bytes == 0 and status.pinned_memory_limit_bytes == 0

    text = stub.GetMetrics(pb.GetMetricsRequest(), timeout=5).prometheus_text
    assert "cuzk_proofs_completed_total 5\n" in text
    assert 'cuzk_proofs_completed{proof_kind="porep_c2"} 3\n' in text
    assert 'cuzk_proofs_failed{proof_kind="porep_c2"} 1\n' in text
    assert "cuzk_gpu_workers 4\n" in text
    families = [line.split()[2] for line in text.splitlines() if line.startswith("# HELP")]
    assert families == [
        "cuzk_proofs_completed_total",
        "cuzk_proofs_failed_total",
        "cuzk_uptime_seconds",
        "cuzk_queue_depth",
        "cuzk_proofs_completed",
        "cuzk_proofs_failed",
        "cuzk_proof_duration_seconds",
        "cuzk_running_jobs",
        "cuzk_gpu_workers",
    ]

    log = engine.stdout()
    assert (
        f"INFO cuzk_server::service: SubmitProof request_id=porep-1000-1 proof_kind=1 input_size={len(small_c1())}"
        in log
    )
    assert "INFO cuzk_server::service: AwaitProof job_id=porep-1000-1" in log
    assert "WARN cuzk_server::service: CancelProof (not yet implemented) job_id=porep-1000-1" in log
    assert "WARN cuzk_server::service: EvictSRS (not yet implemented) circuit_id=porep-32g" in log
    assert "INFO cuzk_server::service: PreloadSRS circuit_id=snap-32g" in log


def test_oversized_request_is_out_of_range(engine_factory: Any) -> None:
    engine = engine_factory()
    stub = engine.stub()
    big = porep_request("big", payload=b"x" * ((128 << 20) + 1))
    code, details = _code(lambda: stub.SubmitProof(big, timeout=30))
    assert code == grpc.StatusCode.OUT_OF_RANGE
    assert details.startswith("Error, decoded message length too large: found ")
    assert details.endswith("bytes, the limit is: 134217728 bytes")
