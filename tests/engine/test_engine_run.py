"""A 12-proof PoRep run at concurrency 6: TIMELINE order per partition, and GetStatus, /status JSON
and the log telling the same story."""

from __future__ import annotations

import json
import re
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cuzktui.daemon_facts import DAEMON_PROCESS_RSS, KINDS, ProofKind
from cuzktui.proto import proving_pb2 as pb
from engine.pinned import SCALAR_SIZE
from engine.srs import CONSTRAINTS
from tests.engine.engine_harness import FAST, porep_request

POREP = KINDS[ProofKind.POREP_SEAL_COMMIT]

ORDER = ["SYNTH_START", "SYNTH_END", "GPU_QUEUE", "GPU_PICKUP", "GPU_START", "GPU_END"]
PLAIN_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) +(TRACE|DEBUG|INFO|WARN|ERROR) "
    r"(?:((?:[A-Za-z_]\w*\{.*?\}:)+) )?([A-Za-z_][\w:]*): (.*)$"
)


def http_get(port: int, path: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_twelve_porep_proofs_at_concurrency_six(engine_factory: Any) -> None:
    engine = engine_factory(
        {"memory": {"total_budget": "300GiB"}, "pipeline": {"max_parallel_synthesis": 8}}, status=True
    )
    stub = engine.stub()
    ids = [f"porep-1000-{n}" for n in range(12)]

    def prove(job_id: str) -> Any:
        return stub.Prove(pb.ProveRequest(submit=porep_request(job_id)), timeout=120).result

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(prove, ids))
    assert all(r.status == pb.AwaitProofResponse.COMPLETED for r in results)

    # Every partition of every job went through the six phases in order, offsets non-decreasing.
    events: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for line in engine.stderr().splitlines():
        if not line.startswith("TIMELINE,"):
            continue
        _, offset, event, job_id, detail = line.split(",", 4)
        partition = re.search(r"partition=(\d+)", detail)
        assert partition, line
        events.setdefault((job_id, partition.group(1)), []).append((event, int(offset)))
    assert set(events) == {(job_id, str(p)) for job_id in ids for p in range(10)}
    for key, seq in events.items():
        assert [e for e, _ in seq] == ORDER, key
        offsets = [o for _, o in seq]
        assert offsets == sorted(offsets), key

    # Partition counts in the log agree with the TIMELINE and with the results.
    log = engine.stdout()
    for line in log.splitlines():
        assert PLAIN_LINE.match(line), line
    assert log.count("cuzk_core::pipeline: partition synthesis complete partition=") == 120
    assert log.count("cuzk_core::engine: partition GPU prove complete job_id=") == 120
    assembled = re.findall(r"Phase 7: all partitions complete, proof assembled job_id=(\S+) proof_len=1920", log)
    assert sorted(assembled) == sorted(ids)
    for result in results:
        line = re.search(rf"proof assembled job_id={result.job_id} .* synth_ms=(\d+) gpu_ms=(\d+)$", log, re.M)
        assert line and (int(line[1]), int(line[2])) == (result.synthesis_ms, result.gpu_compute_ms)
    synth_sum = sum(int(m) for m in re.findall(r"SYNTH_END,porep-1000-3,partition=\d+,synth_ms=(\d+)", engine.stderr()))
    assert synth_sum == results[3].synthesis_ms

    status = stub.GetStatus(pb.GetStatusRequest(), timeout=5)
    assert status.total_proofs_completed == len(assembled) == 12
    assert status.total_proofs_failed == 0

    raw = http_get(engine.status_port, "/status")
    head, body = raw.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Content-Type: application/json" in head and b"Access-Control-Allow-Origin: *" in head
    assert f"Content-Length: {len(body)}".encode() in head
    doc = json.loads(body)
    assert list(doc) == [
        "uptime_secs", "memory", "synthesis", "pipelines", "gpu_workers", "allocations", "counters", "buffers",
        "emulated_box",  # the engine's own: the daemon's keys come first, in its order
    ]  # fmt: skip
    box = doc["emulated_box"]
    assert (box["ram_bytes"], box["gpus"], box["memory_scale"]) == (256 << 30, 1, 1 / 65536)
    assert box["time_scale"] == FAST["time_scale"]  # so a client that attached shows the box's time
    assert box["box_pid"] is None  # no --box-cgroup: the memory is the engine's own process's
    # Idle: the daemon's own process and what the model keeps resident: the PoRep SRS and PCE, and
    # the pinned pool's idle a/b/c buffers.
    pinned = box["rss_bytes"] - DAEMON_PROCESS_RSS - POREP.srs_bytes - POREP.pce_bytes
    assert pinned >= 0 and pinned % (CONSTRAINTS[ProofKind.POREP_SEAL_COMMIT] * SCALAR_SIZE) == 0
    assert doc["counters"]["total_completed"] == 12
    assert doc["counters"]["completed_by_kind"] == {"porep-c2": 12}
    assert sorted(p["job_id"] for p in doc["pipelines"]) == sorted(ids)  # within the 30 s retention
    for pipeline in doc["pipelines"]:
        assert pipeline["partitions_done"] == pipeline["total_partitions"] == 10
        assert {p["state"] for p in pipeline["partitions"]} == {"done"}
    assert [a["circuit_id"] for a in doc["allocations"]["srs"]] == ["porep-32g"]
    assert doc["memory"]["total_bytes"] == 300 << 30
    assert doc["synthesis"] == {"max_concurrent": 300 // 9, "active": 0}
    assert all(w["state"] == "idle" for w in doc["gpu_workers"])
    assert b" " not in body  # compact JSON
    assert http_get(engine.status_port, "/metrics").startswith(b"HTTP/1.1 404 Not Found\r\n")
