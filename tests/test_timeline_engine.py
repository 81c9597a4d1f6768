"""The timeline against a real cuzk-engine run: 12 PoRep proofs at concurrency 6 over TCP.

The engine writes stdout and stderr into one file (as the supervisor does); the log is parsed
afterwards and the timeline's per-job sums must agree with what AwaitProof reported (docs/daemon-interface.md §1.6:
synthesis_ms = sum of per-partition synth_ms, gpu_compute_ms = sum of per-partition gpu_ms).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from cuzktui.logparse import parse_line
from cuzktui.proto import proving_pb2, proving_pb2_grpc
from cuzktui.supervisor import free_loopback_port
from cuzktui.timeline import Timeline
from tests.conftest import small_c1

pytestmark = pytest.mark.skipif(importlib.util.find_spec("engine.__main__") is None, reason="no cuzk-engine here")

PROOFS, CONCURRENCY, PARTITIONS = 12, 6, 10


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A serving engine: (gRPC target, the merged stdout+stderr log)."""
    address = f"127.0.0.1:{free_loopback_port()}"
    config = tmp_path / "cuzk.toml"
    config.write_text(
        f'[daemon]\nlisten = "{address}"\n'
        "[engine]\ntime_scale = 0.002\nmemory_scale = 0.0000152587890625\ngpus = 1\n"
        '[memory]\ntotal_budget = "300GiB"\n'
        "[pipeline]\nmax_parallel_synthesis = 8\n"
    )
    log = tmp_path / "daemon.log"
    env = {k: v for k, v in os.environ.items() if k != "RUST_LOG"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "engine", "-c", str(config)],
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            env=env,  # colour stays on, as the real daemon's default
            start_new_session=True,
        )
    try:
        with grpc.insecure_channel(address) as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
        yield address, log
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _request(job_id: str) -> proving_pb2.SubmitProofRequest:
    return proving_pb2.SubmitProofRequest(
        request_id=job_id,
        proof_kind=proving_pb2.POREP_SEAL_COMMIT,
        sector_size=34359738368,
        vanilla_proof=small_c1(),
        sector_number=1,
        miner_id=1000,
    )


def test_timeline_agrees_with_await_proof_timings(engine: tuple[str, Path]) -> None:
    address, log = engine
    ids = [f"porep-1000-{n}" for n in range(PROOFS)]
    with grpc.insecure_channel(address) as channel:
        stub = proving_pb2_grpc.ProvingEngineStub(channel)

        def prove(job_id: str) -> proving_pb2.AwaitProofResponse:
            result: proving_pb2.AwaitProofResponse = stub.Prove(
                proving_pb2.ProveRequest(submit=_request(job_id)), timeout=120
            ).result
            return result

        with ThreadPoolExecutor(CONCURRENCY) as pool:
            results = {r.job_id: r for r in pool.map(prove, ids)}
    assert all(r.status == proving_pb2.AwaitProofResponse.COMPLETED for r in results.values())

    timeline = Timeline()
    with log.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            timeline.apply(parse_line(line))

    (segment,) = timeline.segments
    assert segment.anchored
    assert (timeline.completed, timeline.failed, timeline.incomplete) == (PROOFS, 0, 0)
    for job_id, result in results.items():
        job = timeline.job(0, job_id)
        assert job is not None and job.status == "completed", job_id
        assert sorted(job.partitions) == list(range(PARTITIONS))
        assert job.synth_ms_total == result.synthesis_ms, job_id
        assert job.gpu_ms_total == result.gpu_compute_ms, job_id
        assert job.assembled is not None and job.assembled.total_ms == pytest.approx(result.total_ms, abs=2)
        for p in job.partitions.values():
            times = [p.synth_start, p.synth_end, p.gpu_queue, p.gpu_pickup, p.gpu_start, p.gpu_end]
            present = [t for t in times if t is not None]
            assert present == times and times == sorted(present), (job_id, p.index)
            assert p.worker in (0, 1)
    lanes = timeline.lanes()
    assert sorted(lanes) == [0, 1]  # one GPU, two workers per device
    assert sum(len(entries) for entries in lanes.values()) == PROOFS * PARTITIONS
    span = timeline.time_span()
    assert span is not None
    busy = timeline.busy_fraction(*span)
    assert all(0 < fraction <= 1 for fraction in busy.values())
    assert timeline.pipeline_now() == (0, 0, 0)
